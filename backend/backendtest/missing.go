package backendtest

import (
	"testing"

	"lifeboat/backend"
)

func testMissing(t *testing.T, b backend.Backend) {
	g := newGen(5)
	// A pack sharing the shard of a missing one, so the shard exists.
	present := g.handle(backend.Pack)
	save(t, b, present, g.data(10))
	sameShard := backend.Handle{Type: backend.Pack, Name: present.Name[:2] + g.name()[2:]}
	hs := []backend.Handle{sameShard}
	for _, ft := range backend.FileTypes {
		hs = append(hs, g.handle(ft))
	}
	ctx := t.Context()
	for _, h := range hs {
		_, err := b.Stat(ctx, h)
		wantErr(t, "Stat missing "+h.String(), err, backend.ErrNotFound)
		_, err = b.Load(ctx, h, 0, 0)
		wantErr(t, "Load missing "+h.String(), err, backend.ErrNotFound)
		_, err = b.Load(ctx, h, 5, 10)
		wantErr(t, "ranged Load missing "+h.String(), err, backend.ErrNotFound)
		err = b.Remove(ctx, h)
		wantErr(t, "Remove missing "+h.String(), err, backend.ErrNotFound)
	}
}
