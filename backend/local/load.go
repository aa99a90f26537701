package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"lifeboat/backend"
)

// Load returns length bytes of h from offset, or the rest of the file when
// length is 0. It checks the range against the file size before reading
// and reads with pread, never more than asked.
func (b *Backend) Load(ctx context.Context, h backend.Handle, offset int64, length int) ([]byte, error) {
	return backend.ReadFunc(b.load).Load(ctx, h, offset, length)
}

// LoadInto reads len(dst) bytes of h from offset into dst
// (backend.LoaderInto), with Load's checks.
func (b *Backend) LoadInto(ctx context.Context, h backend.Handle, offset int64, dst []byte) error {
	return backend.ReadFunc(b.load).LoadInto(ctx, h, offset, dst)
}

// load reads length bytes of h from offset (the rest of the file for 0)
// into the buffer alloc returns for the length it settled on.
func (b *Backend) load(ctx context.Context, h backend.Handle, offset int64, length int, alloc func(n int64) []byte) error {
	if err := check(ctx, "load", h); err != nil {
		return err
	}
	if offset < 0 || length < 0 {
		return fmt.Errorf("local: load %s: invalid range offset %d length %d", h, offset, length)
	}
	p := b.path(h)
	f, err := os.Open(p)
	if err != nil {
		return b.fail("load", h, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return b.fail("load", h, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("local: load %s: %s is not a regular file", h, p)
	}
	size := fi.Size()
	n := int64(length)
	if length == 0 {
		n = size - offset
	}
	if offset > size || n > size-offset {
		return shortRead(h, p, offset, n, size)
	}
	buf := alloc(n)
	got, err := f.ReadAt(buf, offset)
	if int64(got) < n {
		if err == nil || errors.Is(err, io.EOF) {
			return shortRead(h, p, offset, n, int64(got)+offset)
		}
		return b.fail("load", h, err)
	}
	return nil
}

func shortRead(h backend.Handle, p string, offset, n, size int64) error {
	return fmt.Errorf("local: load %s: %w: want %d bytes at offset %d, %s has %d", h, backend.ErrShortRead, n, offset, p, size)
}

// Stat returns the size of h.
func (b *Backend) Stat(ctx context.Context, h backend.Handle) (backend.FileInfo, error) {
	if err := check(ctx, "stat", h); err != nil {
		return backend.FileInfo{}, err
	}
	p := b.path(h)
	fi, err := os.Stat(p)
	if err != nil {
		return backend.FileInfo{}, b.fail("stat", h, err)
	}
	if !fi.Mode().IsRegular() {
		return backend.FileInfo{}, fmt.Errorf("local: stat %s: %s is not a regular file", h, p)
	}
	return backend.FileInfo{Name: fi.Name(), Size: fi.Size()}, nil
}
