package backendtest

import (
	"bytes"
	"testing"

	"lifeboat/backend"
)

func testRanges(t *testing.T, b backend.Backend) {
	g := newGen(3)
	h, data := g.handle(backend.Pack), g.data(1000)
	save(t, b, h, data)
	ok := []struct {
		off int64
		n   int
		end int // exclusive end in data
	}{
		{0, 10, 10},     // start
		{500, 100, 600}, // middle
		{990, 10, 1000}, // end
		{999, 1, 1000},  // last byte
		{0, 1000, 1000}, // exact whole file
		{0, 0, 1000},    // 0 = rest, from start
		{400, 0, 1000},  // 0 = rest, from middle
		{1000, 0, 1000}, // 0 = rest, at end: empty
	}
	for _, c := range ok {
		got, err := b.Load(t.Context(), h, c.off, c.n)
		if err != nil {
			t.Errorf("Load(%d, %d): %v", c.off, c.n, err)
			continue
		}
		if !bytes.Equal(got, data[c.off:c.end]) {
			t.Errorf("Load(%d, %d): got %d bytes, want %d (or content differs)", c.off, c.n, len(got), c.end-int(c.off))
		}
	}
	// The buffer Load returns is the caller's: overwriting it changes
	// neither what is stored nor what the next Load returns.
	first, err := b.Load(t.Context(), h, 0, 0)
	if err != nil {
		t.Fatalf("Load(0, 0): %v", err)
	}
	clear(first)
	if again, err := b.Load(t.Context(), h, 100, 800); err != nil || !bytes.Equal(again, data[100:900]) {
		t.Errorf("Load after overwriting an earlier Load's buffer: %v, or its content differs", err)
	}
	short := []struct {
		off int64
		n   int
	}{{995, 10}, {1000, 1}, {1001, 0}, {2000, 5}, {0, 1001}, {999, 2}}
	for _, c := range short {
		got, err := b.Load(t.Context(), h, c.off, c.n)
		wantErr(t, "Load past end", err, backend.ErrShortRead)
		if err == nil {
			t.Errorf("Load(%d, %d) of 1000 bytes returned %d bytes and no error", c.off, c.n, len(got))
		}
	}
	for _, c := range []struct {
		off int64
		n   int
	}{{-1, 0}, {-1, 10}, {0, -1}} {
		if _, err := b.Load(t.Context(), h, c.off, c.n); err == nil {
			t.Errorf("Load(%d, %d): no error for a negative range", c.off, c.n)
		}
	}
}

func testEmptyRanges(t *testing.T, b backend.Backend) {
	h := newGen(4).handle(backend.Index)
	save(t, b, h, nil)
	got, err := b.Load(t.Context(), h, 0, 0)
	if err != nil || len(got) != 0 {
		t.Errorf("Load(0, 0) of empty file: %d bytes, %v", len(got), err)
	}
	_, err = b.Load(t.Context(), h, 0, 1)
	wantErr(t, "Load(0, 1) of empty file", err, backend.ErrShortRead)
	_, err = b.Load(t.Context(), h, 1, 0)
	wantErr(t, "Load(1, 0) of empty file", err, backend.ErrShortRead)
}
