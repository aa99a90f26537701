package backendtest

import (
	"bytes"
	"sync"
	"testing"

	"lifeboat/backend"
)

func testOverwrite(t *testing.T, b backend.Backend) {
	g := newGen(8)
	for _, ft := range []backend.FileType{backend.Config, backend.Pack, backend.Lock} {
		h, a, c := g.handle(ft), g.data(100), g.data(50)
		save(t, b, h, a)
		save(t, b, h, c)
		wantLoad(t, b, h, c)
		if got := listAll(t, b, ft); len(got) != 1 || got[h.Name] != 50 {
			t.Errorf("List %s after overwrite: %v, want only %s with size 50", ft, got, h.Name)
		}
	}
}

// testOverwriteConcurrent: loads racing re-saves of the same bytes always
// see the whole file, never a missing or partial one.
func testOverwriteConcurrent(t *testing.T, b backend.Backend) {
	g := newGen(9)
	h, data := g.handle(backend.Pack), g.data(256<<10)
	save(t, b, h, data)
	ctx := t.Context()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				if err := b.Save(ctx, h, data); err != nil {
					t.Errorf("re-Save %s: %v", h, err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 20 {
				got, err := b.Load(ctx, h, 0, 0)
				if err != nil {
					t.Errorf("Load during re-Save: %v", err)
					return
				}
				if !bytes.Equal(got, data) {
					t.Errorf("Load during re-Save: got %d bytes, want %d (or content differs)", len(got), len(data))
					return
				}
			}
		})
	}
	wg.Wait()
}
