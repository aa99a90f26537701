package local

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"lifeboat/backend"
)

// failingFile wraps a real temp file and fails like a full disk would.
type failingFile struct {
	file
	left  int   // bytes Write accepts before failing with werr
	werr  error // nil: writes succeed
	short bool  // Write stops early without an error
	serr  error // Sync error
	cerr  error // Close error (the file is still closed)
}

func (f *failingFile) Write(p []byte) (int, error) {
	if f.short {
		return f.file.Write(p[:len(p)/2])
	}
	if f.werr != nil && len(p) > f.left {
		n, _ := f.file.Write(p[:f.left])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: f.werr}
	}
	return f.file.Write(p)
}

func (f *failingFile) Sync() error {
	if f.serr != nil {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: f.serr}
	}
	return f.file.Sync()
}

func (f *failingFile) Close() error {
	err := f.file.Close()
	if f.cerr != nil {
		return &os.PathError{Op: "close", Path: f.Name(), Err: f.cerr}
	}
	return err
}

// injectFault makes every later Save on b write through a copy of ff.
func injectFault(b *Backend, ff failingFile) {
	b.createTemp = func(dir, pattern string) (file, error) {
		f, err := osCreateTemp(dir, pattern)
		if err != nil {
			return nil, err
		}
		c := ff
		c.file = f
		return &c, nil
	}
}

func TestSaveFailsMidWrite(t *testing.T) {
	cases := []struct {
		name    string
		ff      failingFile
		noSpace bool
	}{
		{"ENOSPC after 4 KiB written", failingFile{left: 4096, werr: syscall.ENOSPC}, true},
		{"ENOSPC before any byte", failingFile{werr: syscall.ENOSPC}, true},
		{"EDQUOT mid write", failingFile{left: 1000, werr: syscall.EDQUOT}, true},
		{"ENOSPC at fsync", failingFile{serr: syscall.ENOSPC}, true},
		{"ENOSPC at close", failingFile{cerr: syscall.ENOSPC}, true},
		{"EIO mid write", failingFile{left: 10, werr: syscall.EIO}, false},
		{"EIO at fsync", failingFile{serr: syscall.EIO}, false},
		{"short write without error", failingFile{short: true}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newRepo(t)
			old, oldData := savePack(t, b, 5000)
			injectFault(b, c.ff)
			h, data := packOf(64 << 10)
			err := b.Save(t.Context(), h, data)
			if err == nil {
				t.Fatal("Save: no error")
			}
			if got := errors.Is(err, backend.ErrNoSpace); got != c.noSpace {
				t.Errorf("errors.Is(%v, ErrNoSpace) = %v, want %v", err, got, c.noSpace)
			}
			if c.noSpace && !strings.Contains(err.Error(), b.dir) {
				t.Errorf("error does not name the repository: %v", err)
			}
			if c.ff.short && !errors.Is(err, io.ErrShortWrite) {
				t.Errorf("short write: %v, want io.ErrShortWrite", err)
			}
			if _, err := b.Stat(t.Context(), h); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("Stat after failed Save: %v, want ErrNotFound", err)
			}
			if left := tmpEntries(t, b); len(left) != 0 {
				t.Errorf("temp files left after failed Save: %v", left)
			}
			// A failed overwrite keeps the old file whole.
			if err := b.Save(t.Context(), old, oldData); err == nil {
				t.Fatal("overwrite under fault: no error")
			}
			if got, err := b.Load(t.Context(), old, 0, 0); err != nil || !bytes.Equal(got, oldData) {
				t.Errorf("old file after failed overwrite: %d bytes, %v", len(got), err)
			}
			b.createTemp = osCreateTemp
			if err := b.Save(t.Context(), h, data); err != nil {
				t.Errorf("Save after the fault cleared: %v", err)
			}
		})
	}
}
