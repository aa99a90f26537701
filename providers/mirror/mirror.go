// Package mirror holds what the adapters that copy an instance's files
// into a local directory (a mirror) share: the providers.Files handle that
// hands the mirror to capture and releases the instance's lock (a
// keylock.Map the adapter keeps) on Close.
package mirror

import (
	"lifeboat/providers"
)

// Files is the local mirror handed to capture: Dir is the mirror, and
// Close runs the unlock given to NewFiles once (later calls do nothing),
// so the next ReadFiles of the instance can replace the mirror.
type Files struct {
	dir    string
	unlock func()
}

var _ providers.Files = (*Files)(nil)

// NewFiles returns the handle for the mirror dir, held by unlock.
func NewFiles(dir string, unlock func()) *Files {
	return &Files{dir: dir, unlock: unlock}
}

// Dir implements providers.Files.
func (f *Files) Dir() string { return f.dir }

// Close implements providers.Files: it releases the mirror's lock.
func (f *Files) Close() error {
	if f.unlock != nil {
		f.unlock()
		f.unlock = nil
	}
	return nil
}
