package local

import (
	"context"
	"errors"
	"os"
	"testing"

	"lifeboat/backend"
)

// TestLoadIntoErrorsAsLoad: for each failing case, LoadInto gives
// the error Load gives for the same range (same text, same sentinel), and
// leaves the caller's buffer as it was where it fails before reading.
func TestLoadIntoErrorsAsLoad(t *testing.T) {
	b := newRepo(t)
	h, _ := savePack(t, b, 100)
	missing, _ := packOf(7)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		h    backend.Handle
		off  int64
		n    int
		is   error
	}{
		{"cancelled", cancelled, h, 0, 10, context.Canceled},
		{"missing", t.Context(), missing, 0, 10, backend.ErrNotFound},
		{"past the end", t.Context(), h, 95, 10, backend.ErrShortRead},
		{"offset past the end", t.Context(), h, 101, 1, backend.ErrShortRead},
		{"negative offset", t.Context(), h, -1, 1, nil},
	} {
		_, lerr := b.Load(c.ctx, c.h, c.off, c.n)
		dst := make([]byte, c.n)
		for i := range dst {
			dst[i] = 0xAA
		}
		ierr := b.LoadInto(c.ctx, c.h, c.off, dst)
		if lerr == nil || ierr == nil || lerr.Error() != ierr.Error() {
			t.Errorf("%s: Load %v, LoadInto %v", c.name, lerr, ierr)
		}
		if c.is != nil && (!errors.Is(lerr, c.is) || !errors.Is(ierr, c.is)) {
			t.Errorf("%s: Load %v, LoadInto %v; want both %v", c.name, lerr, ierr, c.is)
		}
		for _, x := range dst {
			if x != 0xAA {
				t.Errorf("%s: LoadInto wrote into the buffer before failing", c.name)
				break
			}
		}
	}
	// A pack truncated under the reader: the same short-read error.
	if err := os.Truncate(b.path(h), 50); err != nil {
		t.Fatal(err)
	}
	_, lerr := b.Load(t.Context(), h, 40, 20)
	ierr := b.LoadInto(t.Context(), h, 40, make([]byte, 20))
	if !errors.Is(lerr, backend.ErrShortRead) || !errors.Is(ierr, backend.ErrShortRead) || lerr.Error() != ierr.Error() {
		t.Errorf("truncated pack: Load %v, LoadInto %v", lerr, ierr)
	}
}
