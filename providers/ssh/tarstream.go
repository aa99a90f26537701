package ssh

import (
	"io"
	"io/fs"

	"lifeboat/providers/tartree"
)

type inodeKey struct{ dev, ino uint64 }

// readError marks a failure reading the source, as opposed to sending.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

type taggedReader struct{ r io.Reader }

func (t taggedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		err = &readError{err}
	}
	return n, err
}

func permBits(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// pathOf is the path a walk error names, relative to the walked tree.
func pathOf(err error, rel string) string { return tartree.PathOf(err, rel) }
