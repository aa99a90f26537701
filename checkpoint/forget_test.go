package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/capture"
)

// snap captures dir as a snapshot of ws (as another path or process
// would, outside the lifecycle) and returns its id.
func snap(t *testing.T, r *repo.Repository, ws, dir string, files map[string]string) blob.ID {
	t.Helper()
	writeFiles(t, dir, files)
	m, err := capture.Run(t.Context(), r, dir, capture.Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

func decisionOf(t *testing.T, res ForgetResult, id blob.ID) prune.Decision {
	t.Helper()
	for _, d := range res.Decisions {
		if d.Snapshot.ID == id {
			return d
		}
	}
	t.Fatalf("no decision on %s in %+v", id.Short(), res.Decisions)
	return prune.Decision{}
}

// Forget keeps every snapshot a pin holds, with the reason, whatever the
// policy says; the rest goes.
func TestForgetKeepsHeldSnapshots(t *testing.T) {
	r := newTestRepo(t).Repository
	ctx := t.Context()
	a, b := t.TempDir(), t.TempDir()
	s1 := snap(t, r, "w", a, map[string]string{"f": "one"})
	s2 := snap(t, r, "w", a, map[string]string{"f": "two"})
	s3 := snap(t, r, "w", b, map[string]string{"g": "other path"}) // newest: the last good root
	if _, err := prune.SetPin(ctx, r, prune.Pin{Workspace: "w", Snapshots: []prune.PinnedSnapshot{{ID: s1, Why: HeldLastGood}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	last1 := &prune.Policy{Last: 1}
	res, err := Forget(ctx, r, ForgetOptions{Workspace: "w", Policy: last1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := decisionOf(t, res, s1); !d.Keep || !slices.Equal(d.Reasons, []string{"held: " + HeldLastGood}) {
		t.Fatalf("held snapshot: %+v", d)
	}
	if d := decisionOf(t, res, s3); !d.Keep || !slices.Equal(d.Reasons, []string{"last 1", prune.RuleLastGoodRoot}) {
		t.Fatalf("newest: %+v", d)
	}
	if d := decisionOf(t, res, s2); d.Keep || res.Kept != 2 || res.Removed != 1 {
		t.Fatalf("s2 %+v; kept %d removed %d", d, res.Kept, res.Removed)
	}
	if n := countSnapshots(t, r, "w"); n != 3 {
		t.Fatalf("the dry run removed snapshots: %d left", n)
	}
	if _, err := Forget(ctx, r, ForgetOptions{Workspace: "w", Policy: last1}); err != nil {
		t.Fatal(err)
	}
	if n := countSnapshots(t, r, "w"); n != 2 {
		t.Fatalf("%d snapshots after forget, want 2", n)
	}
	if err := Verify(ctx, r, s1); err != nil {
		t.Fatalf("the held snapshot: %v", err)
	}
	// A recovery runs: every snapshot of w is held, the last good one with
	// both reasons.
	if _, err := prune.SetPin(ctx, r, prune.Pin{Workspace: "w", Snapshots: []prune.PinnedSnapshot{{ID: s1, Why: HeldLastGood}},
		All: true, AllWhy: "recovery operation op-1 runs"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	s4 := snap(t, r, "w", b, map[string]string{"g": "newer still"})
	res, err = Forget(ctx, r, ForgetOptions{Workspace: "w", Policy: last1})
	if err != nil || res.Removed != 0 || countSnapshots(t, r, "w") != 3 {
		t.Fatalf("forget while all of w is held: %+v, %v", res, err)
	}
	if d := decisionOf(t, res, s1); !slices.Equal(d.Reasons, []string{"held: " + HeldLastGood + "; recovery operation op-1 runs"}) {
		t.Fatalf("s1 reasons %q", d.Reasons)
	}
	if d := decisionOf(t, res, s3); !slices.Equal(d.Reasons, []string{"held: recovery operation op-1 runs"}) {
		t.Fatalf("s3 reasons %q", d.Reasons)
	}
	// Without the pin, the old last good checkpoint goes.
	if _, err := prune.RemovePins(ctx, r, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := Forget(ctx, r, ForgetOptions{Policy: last1}); err != nil {
		t.Fatal(err)
	}
	if snaps, _, _ := snapshot.List(ctx, r, "w"); len(snaps) != 1 || snaps[0].ID != s4 {
		t.Fatalf("left %v", snaps)
	}
}

// A pin that does not load stops forget before it removes anything.
func TestForgetRefusesUnreadablePin(t *testing.T) {
	r := newTestRepo(t).Repository
	ctx := t.Context()
	dir := t.TempDir()
	snap(t, r, "w", dir, map[string]string{"f": "one"})
	snap(t, r, "w", dir, map[string]string{"f": "two"})
	bad, err := r.SaveObject(ctx, crypt.KindPin, blob.Workspace, []byte(`{"version":1,"workspace":"w","future":true}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Forget(ctx, r, ForgetOptions{Policy: &prune.Policy{Last: 1}})
	if err == nil || !strings.Contains(err.Error(), "pins/"+bad.String()) {
		t.Fatalf("forget with an unreadable pin: %v", err)
	}
	if n := countSnapshots(t, r, "w"); n != 2 {
		t.Fatalf("%d snapshots left, want 2", n)
	}
	if _, err := Retain(ctx, r, RetainOptions{Workspace: "w", Default: &prune.Policy{Last: 1}, LastGood: blob.ID{1}}); err == nil || countSnapshots(t, r, "w") != 2 {
		t.Fatalf("retention with an unreadable pin: %v", err)
	}
}

// Stored policies, the default, and workspaces left alone.
func TestForgetPolicies(t *testing.T) {
	r := newTestRepo(t).Repository
	ctx := t.Context()
	dir := t.TempDir()
	for i := range 3 {
		snap(t, r, "w", dir, map[string]string{"f": fmt.Sprint("w", i)})
		snap(t, r, "v", dir, map[string]string{"f": fmt.Sprint("v", i)})
	}
	if _, err := Forget(ctx, r, ForgetOptions{}); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("no policy at all: %v", err)
	}
	if _, err := Forget(ctx, r, ForgetOptions{Policy: &prune.Policy{Last: -1}}); err == nil {
		t.Fatal("a negative policy was applied")
	}
	if _, err := prune.SetPolicy(ctx, r, "v", prune.Policy{Last: 2}, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := Forget(ctx, r, ForgetOptions{})
	if err != nil || !slices.Equal(res.Unmanaged, []string{"w"}) || res.Left["w"] != 3 || res.Kept != 5 || res.Removed != 1 {
		t.Fatalf("stored policy of v only: %+v, %v", res, err)
	}
	res, err = Forget(ctx, r, ForgetOptions{Default: &prune.Policy{Last: 1}})
	if err != nil || len(res.Unmanaged) != 0 || res.Removed != 2 || countSnapshots(t, r, "w") != 1 || countSnapshots(t, r, "v") != 2 {
		t.Fatalf("with a default: %+v, %v", res, err)
	}
	// Retention for one workspace applies the default, keeps lastGood.
	for i := range 2 {
		snap(t, r, "w", dir, map[string]string{"f": fmt.Sprint("w again", i)})
	}
	snaps, _, _ := snapshot.List(ctx, r, "w")
	lastGood := snaps[0].ID // the oldest
	if _, err := Retain(ctx, r, RetainOptions{Workspace: "w", Default: &prune.Policy{Last: 1}, LastGood: lastGood}); err != nil {
		t.Fatal(err)
	}
	if n := countSnapshots(t, r, "w"); n != 2 {
		t.Fatalf("%d snapshots of w after retention, want the newest and the last good", n)
	}
	if err := Verify(ctx, r, lastGood); err != nil {
		t.Fatal(err)
	}
	if _, err := Retain(ctx, r, RetainOptions{Workspace: "w"}); err == nil {
		t.Fatal("retention without a last good checkpoint")
	}
	// A snapshot already gone is what forget wanted.
	if gone, err := RemoveSnapshot(ctx, r, nil, blob.ID{7}); err != nil || !gone {
		t.Fatalf("removing a snapshot that is not there: gone %v, %v", gone, err)
	}
}

// A pin written after forget planned (a promotion that named a new
// checkpoint while forget ran) is seen under the exclusive lock of the
// removals: that snapshot stays.
func TestForgetSeesPinWrittenAfterItsPlan(t *testing.T) {
	r := newTestRepo(t).Repository
	ctx := t.Context()
	a := t.TempDir()
	s1 := snap(t, r, "w", a, map[string]string{"f": "one"})
	snap(t, r, "w", a, map[string]string{"f": "two"})
	l, err := r.Lock(ctx, repo.LockShared, repo.LockOptions{Wait: -1, Refresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	res, err := PlanForget(ctx, r, ForgetOptions{Workspace: "w", Policy: &prune.Policy{Last: 1}, Lock: l})
	if err != nil || res.Removed != 1 || decisionOf(t, res, s1).Keep {
		t.Fatalf("plan: %+v %v", res, err)
	}
	// The promotion's hold, under its own shared lock, after the plan.
	if err := r.Locked(ctx, repo.LockShared, repo.LockOptions{Wait: -1, Refresh: -1}, func(*repo.Lock) error {
		_, err := prune.SetPin(ctx, r, prune.Pin{Workspace: "w", Owner: "store-x",
			Snapshots: []prune.PinnedSnapshot{{ID: s1, Why: "being promoted to the last good checkpoint"}}}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := RemovePlanned(ctx, r, l, repo.LockOptions{Wait: -1, Refresh: -1}, &res); err != nil {
		t.Fatal(err)
	}
	if d := decisionOf(t, res, s1); !d.Keep || res.Removed != 0 || res.Kept != 2 {
		t.Fatalf("after the removals: %+v, %+v", d, res)
	}
	if err := Verify(ctx, r, s1); err != nil {
		t.Fatalf("the snapshot held after the plan was removed: %v", err)
	}
}

// Two forgets that planned under shared locks of their own remove their
// snapshots beside each other: RemovePlanned lets go of the shared lock
// before it waits for the exclusive one, so neither waits for the other
// (two servers' scheduled forgets, each upgrading its shared lock, waited
// for each other until their lock waits ran out).
func TestRemovePlannedBesideAnotherForget(t *testing.T) {
	r := newTestRepo(t).Repository
	ctx := t.Context()
	a := t.TempDir()
	ids := []blob.ID{
		snap(t, r, "w", a, map[string]string{"f": "one"}),
		snap(t, r, "w", a, map[string]string{"f": "two"}),
	}
	var locks []*repo.Lock
	for range ids {
		l, err := r.Lock(ctx, repo.LockShared, repo.LockOptions{Wait: -1, Refresh: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Unlock(ctx) }()
		locks = append(locks, l)
	}
	errs := make(chan error, len(ids))
	for i, id := range ids {
		go func() {
			res := ForgetResult{Decisions: []prune.Decision{{Snapshot: prune.Snapshot{ID: id, Workspace: "w"}}}, Removed: 1}
			errs <- RemovePlanned(ctx, r, locks[i], repo.LockOptions{Wait: time.Minute, Refresh: -1}, &res)
		}()
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Fatalf("a forget beside another: %v", err)
		}
	}
	for _, id := range ids {
		if err := Verify(ctx, r, id); err == nil {
			t.Fatalf("snapshot %s was not removed", id.Short())
		}
	}
}
