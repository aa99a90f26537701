package backendtest

import (
	"bytes"
	"sync"
	"testing"

	"lifeboat/backend"
)

// testOverwrite: saving a name again with the same bytes (a name that is
// a hash, or a retried Save) succeeds and leaves one file with them; the
// config is created once: other bytes fail with ErrExists and leave it.
func testOverwrite(t *testing.T, b backend.Backend) {
	g := newGen(8)
	for _, ft := range []backend.FileType{backend.Config, backend.Pack, backend.Lock} {
		h, a := g.handle(ft), g.data(100)
		save(t, b, h, a)
		save(t, b, h, a)
		wantLoad(t, b, h, a)
		if got := listAll(t, b, ft); len(got) != 1 || got[h.Name] != 100 {
			t.Errorf("List %s after saving again: %v, want only %s with size 100", ft, got, h.Name)
		}
	}
	cfg, a := g.handle(backend.Config), g.data(30)
	wantErr(t, "Save of a different config", b.Save(t.Context(), cfg, a), backend.ErrExists)
	if got := listAll(t, b, backend.Config); len(got) != 1 || got["config"] != 100 {
		t.Errorf("List config after a refused Save: %v, want the first config (100 bytes)", got)
	}
}

// testConfigOnce: of many processes saving different configs at once,
// exactly one wins; the others get ErrExists.
func testConfigOnce(t *testing.T, b backend.Backend) {
	g := newGen(14)
	const n = 8
	datas := make([][]byte, n)
	for i := range datas {
		datas[i] = g.data(200 + i)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = b.Save(t.Context(), backend.Handle{Type: backend.Config}, datas[i]) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("two configs saved: %d and %d", won, i)
		case err == nil:
			won = i
		default:
			wantErr(t, "losing config Save", err, backend.ErrExists)
		}
	}
	if won >= 0 {
		wantLoad(t, b, backend.Handle{Type: backend.Config}, datas[won])
	} else {
		t.Errorf("no config Save won")
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
