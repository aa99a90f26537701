package backendtest

import (
	"errors"
	"testing"

	"lifeboat/backend"
)

// wantGone checks the answer to a Remove of a missing file: nil or
// ErrNotFound (backend.Backend's contract).
func wantGone(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("%s: got error %v, want none or %v", what, err, backend.ErrNotFound)
	}
}

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
		wantGone(t, "Remove missing "+h.String(), b.Remove(ctx, h))
	}
}
