package backendtest

import (
	"context"
	"testing"

	"lifeboat/backend"
)

func testCanceled(t *testing.T, b backend.Backend) {
	g := newGen(12)
	existing, data := g.handle(backend.Pack), g.data(100)
	save(t, b, existing, data)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	h := g.handle(backend.Pack)
	wantErr(t, "Save with canceled context", b.Save(ctx, h, data), context.Canceled)
	_, err := b.Stat(t.Context(), h)
	wantErr(t, "Stat of a Save canceled before it began", err, backend.ErrNotFound)

	_, err = b.Load(ctx, existing, 0, 0)
	wantErr(t, "Load with canceled context", err, context.Canceled)
	_, err = b.Stat(ctx, existing)
	wantErr(t, "Stat with canceled context", err, context.Canceled)
	calls := 0
	err = b.List(ctx, backend.Pack, func(backend.FileInfo) error { calls++; return nil })
	wantErr(t, "List with canceled context", err, context.Canceled)
	if calls != 0 {
		t.Errorf("List with canceled context called fn %d times", calls)
	}
	wantErr(t, "Remove with canceled context", b.Remove(ctx, existing), context.Canceled)
	wantLoad(t, b, existing, data) // the canceled Remove removed nothing
}
