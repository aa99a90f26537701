package checkpoint

import (
	"slices"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/blob"
	"lifeboat/prune"
	"lifeboat/repo"
)

// A snapshot another forget removed between this forget's plan and its
// removals is no error, and is reported as gone.
func TestForgetToleratesSnapshotAlreadyGone(t *testing.T) {
	r := newTestRepo(t).Repository
	ctx := t.Context()
	dir := t.TempDir()
	s1 := snap(t, r, "w", dir, map[string]string{"f": "one"})
	snap(t, r, "w", dir, map[string]string{"f": "two"})
	snap(t, r, "w", dir, map[string]string{"f": "three"})
	res, err := PlanForget(ctx, r, ForgetOptions{Workspace: "w", Policy: &prune.Policy{Last: 1}})
	if err != nil || res.Removed != 2 {
		t.Fatalf("plan: %+v, %v", res, err)
	}
	if gone, err := RemoveSnapshot(ctx, r, nil, s1); err != nil || gone { // the other forget
		t.Fatalf("removing s1: gone %v, %v", gone, err)
	}
	if err := RemovePlanned(ctx, r, nil, repo.LockOptions{}, &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Gone, []blob.ID{s1}) || res.Removed != 2 || countSnapshots(t, r, "w") != 1 {
		t.Fatalf("gone %v, removed %d, %d left; want s1 gone, 2 removed, 1 left", res.Gone, res.Removed, countSnapshots(t, r, "w"))
	}
}

// Retention after a capture tolerates the same, at both points: a
// snapshot listed and gone before its manifest was read, and one gone
// when retention came to remove it.
func TestRetainToleratesSnapshotAlreadyGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   fault.Op
	}{{"listed then gone", fault.OnLoad}, {"gone at removal", fault.OnRemove}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRepo(t)
			ctx := t.Context()
			dir := t.TempDir()
			old := snap(t, tr.Repository, "w", dir, map[string]string{"f": "one"})
			last := snap(t, tr.Repository, "w", dir, map[string]string{"f": "two"})
			tr.goneAt(t, tc.op, old)
			res, err := Retain(ctx, tr.Repository, RetainOptions{Workspace: "w", LastGood: last, Default: &prune.Policy{Last: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Gone, []blob.ID{old}) || len(res.Unreadable) != 0 {
				t.Fatalf("gone %v, unreadable %v; want %s gone", res.Gone, res.Unreadable, old.Short())
			}
		})
	}
}

// Retention with no policy stored or given reads no snapshot: a server
// applies it after every capture, and nothing bounds the snapshots of a
// workspace without a policy.
func TestRetainWithoutPolicyReadsNoSnapshot(t *testing.T) {
	tr := newTestRepo(t)
	ctx := t.Context()
	dir := t.TempDir()
	snap(t, tr.Repository, "w", dir, map[string]string{"f": "one"})
	last := snap(t, tr.Repository, "w", dir, map[string]string{"f": "two"})
	loads := tr.fault.Add(fault.OnLoad).Match(backend.Snapshot).Always()
	res, err := Retain(ctx, tr.Repository, RetainOptions{Workspace: "w", LastGood: last})
	if err != nil || !slices.Equal(res.Unmanaged, []string{"w"}) || res.Removed != 0 {
		t.Fatalf("retention without a policy: %+v, %v", res, err)
	}
	if n := loads.Fired(); n != 0 {
		t.Errorf("retention without a policy loaded snapshots %d times", n)
	}
}
