package recovery

import (
	"context"
	"testing"

	"lifeboat/prune"
)

// RepoHolds writes a workspace's hold once per change: the same hold again
// (in this process, or in the next one reading what the last one wrote)
// writes nothing, and a new one replaces the old pin object.
func TestRepoHoldsWritesOnChange(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	a, b := hexID('a'), hexID('b')
	pinIDs := func() []string {
		t.Helper()
		p, err := prune.LoadPins(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range p.Objects {
			out = append(out, o.ID.String())
		}
		return out
	}
	h := &RepoHolds{Repo: r}
	hs := HoldSet{Workspace: "w", Snapshots: map[string]string{a: "last good", b: "being promoted"}}
	if err := h.Hold(ctx, hs); err != nil {
		t.Fatal(err)
	}
	first := pinIDs()
	if len(first) != 1 {
		t.Fatalf("pins after the first hold: %v", first)
	}
	if err := h.Hold(ctx, hs); err != nil {
		t.Fatal(err)
	}
	if got := pinIDs(); len(got) != 1 || got[0] != first[0] {
		t.Fatalf("the same hold was written again: %v -> %v", first, got)
	}
	h2 := &RepoHolds{Repo: r} // the next server
	if err := h2.Hold(ctx, hs); err != nil {
		t.Fatal(err)
	}
	if got := pinIDs(); len(got) != 1 || got[0] != first[0] {
		t.Fatalf("the next process wrote the same hold again: %v -> %v", first, got)
	}
	if err := h2.Hold(ctx, HoldSet{Workspace: "w", Snapshots: map[string]string{b: "last good"}}); err != nil {
		t.Fatal(err)
	}
	got := pinIDs()
	if len(got) != 1 || got[0] == first[0] {
		t.Fatalf("a new hold did not replace the old pin: %v -> %v", first, got)
	}
	p, _ := prune.LoadPins(ctx, r)
	if _, held := p.Held("w", mustID(t, a)); held {
		t.Fatal("the released snapshot is still held")
	}
	if err := h2.Release(ctx, "w"); err != nil || len(pinIDs()) != 0 {
		t.Fatalf("release: %v, pins %v", err, pinIDs())
	}
}

func hexID(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
