package backendtest

import (
	"testing"

	"lifeboat/backend"
)

func testRemove(t *testing.T, b backend.Backend) {
	g := newGen(10)
	ctx := t.Context()
	for _, ft := range backend.FileTypes {
		h, keep := g.handle(ft), g.handle(ft)
		data := g.data(33)
		save(t, b, h, data)
		if ft != backend.Config {
			save(t, b, keep, data)
		}
		if err := b.Remove(ctx, h); err != nil {
			t.Fatalf("Remove %s: %v", h, err)
		}
		_, err := b.Stat(ctx, h)
		wantErr(t, "Stat after Remove", err, backend.ErrNotFound)
		_, err = b.Load(ctx, h, 0, 0)
		wantErr(t, "Load after Remove", err, backend.ErrNotFound)
		wantGone(t, "second Remove", b.Remove(ctx, h))
		got := listAll(t, b, ft)
		if _, ok := got[h.Name]; ok {
			t.Errorf("List %s still shows removed %s", ft, h.Name)
		}
		if ft != backend.Config {
			if _, ok := got[keep.Name]; !ok || len(got) != 1 {
				t.Errorf("List %s after Remove: %v, want only %s", ft, got, keep.Name)
			}
		}
		save(t, b, h, data) // the name is usable again
		wantLoad(t, b, h, data)
	}
}
