// Package mirror holds what the adapters that copy an instance's files
// into a local directory (a mirror) share: a lock per instance, and the
// providers.Files handle that hands the mirror to capture and releases
// the lock on Close.
package mirror

import (
	"sync"

	"lifeboat/providers"
)

// Locks is a mutex per instance, made on first use; the zero value is
// ready. Entries are never removed (one small mutex per instance seen).
type Locks struct {
	mu sync.Mutex
	m  map[providers.InstanceID]*sync.Mutex
}

// of returns id's mutex.
func (l *Locks) of(id providers.InstanceID) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[providers.InstanceID]*sync.Mutex{}
	}
	m, ok := l.m[id]
	if !ok {
		m = &sync.Mutex{}
		l.m[id] = m
	}
	return m
}

// Lock locks id and returns the unlock function.
func (l *Locks) Lock(id providers.InstanceID) func() {
	m := l.of(id)
	m.Lock()
	return m.Unlock
}

// IfUnlocked runs fn holding id's lock, unless someone holds it (a
// ReadFiles whose Files is not closed yet): then fn is not run. Destroy
// uses it to remove a mirror nobody is using.
func (l *Locks) IfUnlocked(id providers.InstanceID, fn func()) {
	m := l.of(id)
	if !m.TryLock() {
		return
	}
	defer m.Unlock()
	fn()
}

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
