package backendtest

import (
	"bytes"
	"testing"

	"lifeboat/backend"
)

// testLoadRange checks backend.LoadRange against the same ranges as Load:
// the same bytes, in the caller's buffer when the backend is a
// LoaderInto, and the same errors for ranges past the end and missing
// files.
func testLoadRange(t *testing.T, b backend.Backend) {
	g := newGen(5)
	h, data := g.handle(backend.Pack), g.data(1000)
	save(t, b, h, data)
	_, into := b.(backend.LoaderInto)
	buf := make([]byte, 0, 1000)
	for _, c := range []struct {
		off int64
		n   int
	}{{0, 10}, {500, 100}, {990, 10}, {999, 1}, {0, 1000}} {
		got, err := backend.LoadRange(t.Context(), b, h, c.off, c.n, buf)
		if err != nil {
			t.Errorf("LoadRange(%d, %d): %v", c.off, c.n, err)
			continue
		}
		if !bytes.Equal(got, data[c.off:c.off+int64(c.n)]) {
			t.Errorf("LoadRange(%d, %d): got %d bytes, want %d (or content differs)", c.off, c.n, len(got), c.n)
		}
		if into && &got[0] != &buf[:1][0] {
			t.Errorf("LoadRange(%d, %d) of a LoaderInto did not read into the buffer given", c.off, c.n)
		}
	}
	// A buffer too small, or none: a new one.
	if got, err := backend.LoadRange(t.Context(), b, h, 100, 200, make([]byte, 0, 199)); err != nil || !bytes.Equal(got, data[100:300]) {
		t.Errorf("LoadRange with a small buffer: %d bytes, %v", len(got), err)
	}
	for _, c := range []struct {
		off int64
		n   int
	}{{995, 10}, {1000, 1}, {2000, 5}, {0, 1001}, {999, 2}} {
		_, err := backend.LoadRange(t.Context(), b, h, c.off, c.n, buf)
		wantErr(t, "LoadRange past end", err, backend.ErrShortRead)
	}
	_, err := backend.LoadRange(t.Context(), b, g.handle(backend.Pack), 0, 10, buf)
	wantErr(t, "LoadRange of a missing file", err, backend.ErrNotFound)
}
