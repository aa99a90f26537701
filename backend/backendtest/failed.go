package backendtest

import (
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
)

// testFailedSave: a Save that fails (here by the fault wrapper, standing
// in for a full disk) leaves nothing visible, and later Saves work.
func testFailedSave(t *testing.T, inner backend.Backend) {
	g := newGen(13)
	b := fault.Wrap(inner)
	b.Add(fault.OnSave).Match(backend.Pack).Nth(2).Fail(backend.ErrNoSpace)
	first, failed, third := g.handle(backend.Pack), g.handle(backend.Pack), g.handle(backend.Pack)
	data := g.data(1000)
	save(t, b, first, data)
	wantErr(t, "Save with injected full disk", b.Save(t.Context(), failed, data), backend.ErrNoSpace)
	save(t, b, third, data)
	_, err := b.Stat(t.Context(), failed)
	wantErr(t, "Stat after failed Save", err, backend.ErrNotFound)
	if got := listAll(t, b, backend.Pack); len(got) != 2 {
		t.Errorf("List after failed Save: %v, want 2 files", got)
	}
	wantLoad(t, b, first, data)
	b.VerifyAllFired(t)
}
