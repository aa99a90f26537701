package demo

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lifeboat/bench"
	"lifeboat/profile/fixture"
	"lifeboat/recovery"
)

// TestDemo runs the demo and then checks what it left on disk, apart from
// its own checks: the workspace keeps its id on a new instance and
// generation through one recovered operation approved with the demo's
// key, the old sandbox is gone, the replacement's files are what the
// seeded corpus and churn make, and the browser session fixture is whole.
func TestDemo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var names []string
	err := Run(ctx, dir, func(s Step) {
		names = append(names, s.Name)
		if s.Detail == "" || s.Seconds < 0 {
			t.Errorf("step %+v", s)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "init workspace capture change capture again lose detect offer approve restore verify"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("steps %q, want %q", got, want)
	}

	st, err := recovery.OpenStore(filepath.Join(dir, StateDir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Workspace(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := st.Operations(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 {
		t.Fatalf("%d recovery operations, want 1: %+v", len(ops), ops)
	}
	op := ops[0]
	if op.State != recovery.OpRecovered || op.IdempotencyKey != Approval || op.Replacement != w.Instance ||
		op.OldInstance == w.Instance || op.OldInstance == "" || w.Generation != 1 || op.NewGeneration != 1 || w.LastGood.Snapshot != op.Checkpoint {
		t.Fatalf("workspace %+v after operation %+v", w, op)
	}
	root := filepath.Join(dir, SandboxesDir)
	if got, err := Sandboxes(root); err != nil || !slices.Equal(got, []string{string(w.Instance)}) {
		t.Fatalf("sandboxes %v (%v), want only %s", got, err, w.Instance)
	}

	// The replacement's project files are the copy taken before the loss,
	// and, apart from the times the churn set from the clock, what the seed
	// and the churn make.
	replacement := filepath.Join(root, string(w.Instance))
	if d, err := bench.Compare(filepath.Join(dir, ExpectedDir), filepath.Join(replacement, "project")); err != nil || len(d) > 0 {
		t.Fatalf("replacement differs from what was captured: %v %v", d, err)
	}
	regen := t.TempDir()
	if err := bench.Generate(regen, Seed, bench.SmallScale); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.Churn(regen, 2); err != nil {
		t.Fatal(err)
	}
	d, err := bench.Compare(regen, filepath.Join(replacement, "project"))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range d {
		if !strings.Contains(x, ": mtime ") && !strings.Contains(x, ": dir mtime ") {
			t.Fatalf("replacement differs from the seeded workspace: %s", x)
		}
	}
	if err := fixture.New(Seed).Check(ctx, filepath.Join(replacement, filepath.FromSlash(bench.ProfileRel)), true); err != nil {
		t.Fatalf("browser profile in the replacement: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, string(op.OldInstance))); !os.IsNotExist(err) {
		t.Fatalf("the destroyed sandbox %s is back: %v", op.OldInstance, err)
	}
}
