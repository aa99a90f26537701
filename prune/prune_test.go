package prune

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
)

func TestPruneDeletesAndRepacks(t *testing.T) { storetest.Each(t, testPruneDeletesAndRepacks) }

func testPruneDeletesAndRepacks(t *testing.T, s storetest.Store) {
	e := newEnvIn(t, s)
	r := e.open(nil)
	ids := saveBlobs(t, r, 1, 120)
	a := e.src.add("a", ids[:80])
	e.src.add("b", ids[60:])
	// Nothing to do while both are kept.
	p, err := PlanPrune(t.Context(), r, e.src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Nothing() || p.LiveBlobs != 120 || p.Snapshots != 2 {
		t.Fatalf("plan with everything live: %+v", p)
	}
	p.Close()

	e.src.forget(a)
	before, _, _ := r.Index().Count()
	p, st := e.prune(r, Options{MaxUnused: 0.01, RunKeys: 7}) // many sorted runs
	t.Logf("plan: delete %d, repack %d; stats %+v", len(p.Delete), len(p.Repack), st)
	if p.LiveBlobs != 60 || len(p.Delete)+len(p.Repack) == 0 || st.PacksDeleted != len(p.Delete)+len(p.Repack) {
		t.Fatalf("plan %+v, stats %+v", p, st)
	}
	if len(p.Repack) > 0 && (st.BlobsCopied == 0 || st.PacksWritten == 0) {
		t.Fatalf("repack planned but nothing copied: %+v", st)
	}
	loadAll(t, r, ids[60:])
	after, _, _ := r.Index().Count()
	if after >= before || after < 60 {
		t.Fatalf("index had %d blobs, has %d", before, after)
	}
	res := checkClean(t, r)
	if len(res.Notices) > 0 {
		t.Fatalf("notices after a finished prune: %+v", res.Notices)
	}
	// Prune dropped what it deleted from its own local index: no rebuild
	// is needed, and it holds what a fresh one built from the remaining
	// index objects holds.
	if st, err := r.SyncIndex(t.Context()); err != nil || st.Dropped != 0 || st.Applied != 0 {
		t.Fatalf("sync after prune: %+v %v", st, err)
	}
	fresh, err := repo.Open(t.Context(), e.be, repotest.Password, repo.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(t.Context())
	fb, fp, _ := fresh.Index().Count()
	ob, op, _ := r.Index().Count()
	if fb != ob || fp != op {
		t.Fatalf("prune's index has %d blobs in %d packs, a fresh one %d in %d", ob, op, fb, fp)
	}
	// Every blob only a forgotten snapshot used is gone (with MaxUnused 1%).
	gone := 0
	for _, id := range ids[:60] {
		if _, ok, _ := r.LookupBlob(blob.Workspace, blob.Data, id); !ok {
			gone++
		}
	}
	if float64(gone) < 0.9*60 {
		t.Fatalf("only %d of 60 dead blobs are gone", gone)
	}
	// A second prune finds nothing more to delete.
	p2, err := PlanPrune(t.Context(), r, e.src, Options{MaxUnused: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if len(p2.Delete) != 0 || len(p2.Unindexed) != 0 {
		t.Fatalf("second plan: %+v", p2)
	}
}

func TestPruneOtherProcessIndexDropsDeletedPacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ids := saveBlobs(t, r, 2, 80)
	a := e.src.add("a", ids[:40])
	e.src.add("b", ids[40:])
	// Another process opened the repository (and synced its index) before the prune.
	other, err := repo.Open(t.Context(), e.be, repotest.Password, repo.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(t.Context())
	e.src.forget(a)
	_, pst := e.prune(r, Options{MaxUnused: 0.001})
	st, err := other.SyncIndex(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Incremental, never a rebuild: it loads only the prune's new index
	// objects and drops the ones the prune removed.
	if st.Applied != pst.IndexWritten || st.Dropped != pst.IndexRemoved || pst.IndexRemoved == 0 {
		t.Fatalf("the other process's sync after prune: %+v; prune wrote %d and removed %d index objects; want those applied and dropped",
			st, pst.IndexWritten, pst.IndexRemoved)
	}
	var stale []string
	err = other.Index().ForEachBlob(blob.Workspace, func(loc index.Location) error {
		if _, err := e.be.Stat(t.Context(), backend.Handle{Type: backend.Pack, Name: loc.Pack.String()}); err != nil {
			stale = append(stale, loc.ID.Short())
		}
		return nil
	})
	if err != nil || len(stale) > 0 {
		t.Fatalf("other index still points at deleted packs for %v (%v)", stale, err)
	}
	loadAll(t, other, ids[40:])
}

func TestPruneRefusesDamagedSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ids := saveBlobs(t, r, 3, 40)
	e.src.add("good", ids[:20])
	bad := e.src.add("bad", ids[20:30])
	e.src.damaged = map[blob.ID]bool{bad: true}
	p, err := PlanPrune(t.Context(), r, e.src, Options{})
	if !errors.Is(err, repo.ErrDamaged) || !strings.Contains(err.Error(), bad.String()) || !strings.Contains(err.Error(), "--forget-damaged") {
		t.Fatalf("want a refusal naming %s, got %v", bad.Short(), err)
	}
	if _, err := p.Execute(t.Context(), r, e.src, ExecOptions{Lock: lockFor(r)}); !errors.Is(err, repo.ErrDamaged) {
		t.Fatalf("executing a refused plan: %v", err)
	}
	p.Close()
	// Told to drop it, prune goes ahead; the blobs it could still read
	// were marked, the rest that nothing uses go.
	p, st := e.prune(r, Options{ForgetDamaged: true, MaxUnused: 0.001})
	if len(p.Damaged) != 1 || p.Damaged[0].ID != bad || st.SnapshotsForgotten != 1 {
		t.Fatalf("plan %+v stats %+v", p, st)
	}
	loadAll(t, r, ids[:20])
	checkClean(t, r)
}

func TestPruneRescuesBlobsOfNewSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ids := saveBlobs(t, r, 4, 60)
	a := e.src.add("a", ids[:30])
	e.src.add("b", ids[30:])
	e.src.forget(a)
	p, err := PlanPrune(t.Context(), r, e.src, Options{MaxUnused: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.Delete)+len(p.Repack) == 0 {
		t.Fatal("nothing condemned")
	}
	// A capture that found ids[:30] in its (stale) index wrote a snapshot
	// using them after the plan, before the delete phase.
	e.src.onList = func() { e.src.add("c", ids[:30]) }
	st, err := p.Execute(t.Context(), r, e.src, ExecOptions{Lock: lockFor(r)})
	if err != nil {
		t.Fatal(err)
	}
	if st.NewSnapshots != 1 || st.Rescued == 0 {
		t.Fatalf("stats %+v", st)
	}
	loadAll(t, r, ids)
	checkClean(t, r)
}

func TestPruneBackendErrorThenRerun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		op   fault.Op
		ft   backend.FileType
		nth  int
	}{
		{"save pack", fault.OnSave, backend.Pack, 1},
		{"save index", fault.OnSave, backend.Index, 2},
		{"remove index", fault.OnRemove, backend.Index, 1},
		{"remove pack", fault.OnRemove, backend.Pack, 3},
		// The first pack load: blobs go to packs at random, so how many
		// packs a repack reads varies from run to run.
		{"load pack", fault.OnLoad, backend.Pack, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.open(nil)
			// Every third blob dies, so every pack is repacked whatever
			// order the blobs were packed in (with the first 70 dead, the
			// packs could split exactly there and leave no pack to load).
			live := e.forgetEveryNth(t, r, 5, 150, 3)
			if err := r.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			fb := fault.Wrap(e.be)
			fb.Add(tc.op).Match(tc.ft).Nth(tc.nth).Fail(nil)
			rf := e.open(fb)
			p, err := PlanPrune(t.Context(), rf, e.src, Options{MaxUnused: 0.001})
			if err == nil {
				_, err = p.Execute(t.Context(), rf, e.src, ExecOptions{Lock: lockFor(rf)})
				p.Close()
			}
			if !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("want the injected failure, got %v", err)
			}
			fb.VerifyAllFired(t)
			_ = rf.Close(t.Context())
			res := e.recoversAfterFailure(t, live)
			if len(res.Notices) > 0 {
				t.Fatalf("re-run left %+v", res.Notices)
			}
		})
	}
}

func TestPruneDeletesUnindexedPacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ids := saveBlobs(t, r, 6, 30)
	e.src.add("a", ids)
	// A pack whose index object was never written (a killed capture).
	fb := fault.Wrap(e.be)
	fb.Add(fault.OnSave).Match(backend.Index).Always().Fail(nil)
	_ = r.Close(t.Context())
	rf := e.open(fb)
	if _, _, err := rf.SaveBlob(t.Context(), blob.Workspace, blob.Data, []byte(strings.Repeat("orphan", 300))); err != nil {
		t.Fatal(err)
	}
	if err := rf.Flush(t.Context()); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("flush: %v", err)
	}
	_ = rf.Close(t.Context())
	r2 := e.open(nil)
	p, st := e.prune(r2, Options{})
	if len(p.Unindexed) != 1 || st.PacksDeleted != 1 {
		t.Fatalf("plan %+v stats %+v", p, st)
	}
	res := checkClean(t, r2)
	if len(res.Notices) != 0 {
		t.Fatalf("notices %+v", res.Notices)
	}
	loadAll(t, r2, ids)
}

func TestLiveSetMergesRuns(t *testing.T) {
	t.Parallel()
	s := newLiveSet(t.TempDir(), 3)
	var want []key
	for i := range 20 {
		k := makeKey(blob.Workspace, blob.Data, blob.ID{byte((i * 7) % 11)})
		want = append(want, k)
		if err := s.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(want, func(a, b key) int { return slices.Compare(a[:], b[:]) })
	want = slices.Compact(want)
	it, err := s.Iter()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []key
	for {
		k, ok, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, k)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d keys, want %d", len(got), len(want))
	}
	s.Remove()
}

var _ = repo.ErrLocked

// A live blob that does not verify while it is copied stops prune before
// it deletes anything. Every other blob stays live, so that every pack
// holds live and dead blobs whatever order the blobs were packed in (with
// the first 50 dead, the packs sometimes split exactly there, and there
// was nothing to repack: 7 runs in 200).
func TestPruneStopsOnDamagedLiveBlob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	live := e.forgetEveryNth(t, r, 8, 100, 2)
	_ = r.Close(t.Context())
	fb := fault.Wrap(e.be)
	fb.Add(fault.OnLoad).Match(backend.Pack).Always().FlipBit(8 * 30)
	rf := e.open(fb)
	p, err := PlanPrune(t.Context(), rf, e.src, Options{MaxUnused: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.Repack) == 0 {
		t.Fatal("nothing to repack")
	}
	var packs int
	count := func() int {
		n := 0
		_ = e.be.List(t.Context(), backend.Pack, func(backend.FileInfo) error { n++; return nil })
		return n
	}
	packs = count()
	_, err = p.Execute(t.Context(), rf, e.src, ExecOptions{Lock: lockFor(rf)})
	if !errors.Is(err, repo.ErrCorrupt) || strings.Count(err.Error(), "nothing was deleted") != 1 {
		t.Fatalf("want a corruption error, got %v", err)
	}
	if count() < packs {
		t.Fatal("packs were deleted after a damaged live blob")
	}
	_ = rf.Close(t.Context())
	r2 := e.open(nil)
	loadAll(t, r2, live)
	checkClean(t, r2)
}

// Packs of a tier the Source does not mark (sensitive, until snapshots
// reference it) are never deleted or repacked.
func TestPruneKeepsUnmarkedTier(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ids := saveBlobs(t, r, 9, 20)
	e.src.add("a", ids)
	sens, _, err := r.SaveBlob(t.Context(), blob.Sensitive, blob.Data, []byte(strings.Repeat("cookie jar ", 200)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	p, st := e.prune(r, Options{MaxUnused: 0.001})
	if st.PacksDeleted != 0 || len(p.Delete) != 0 {
		t.Fatalf("plan %+v stats %+v", p, st)
	}
	if _, err := r.LoadBlob(t.Context(), blob.Sensitive, blob.Data, sens, nil); err != nil {
		t.Fatal(err)
	}
}

// A capture that finishes while prune starts: its index object lands after
// prune's handle last read the index, its manifest before prune lists
// snapshots. Prune must list first and sync after, so the new snapshot's
// blobs are found, not reported as damage.
func TestPruneSnapshotFinishedAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	old := saveBlobs(t, r, 11, 20)
	e.src.add("old", old)
	other := e.open(nil) // the concurrent capture's own handle
	var fresh []blob.ID
	e.src.index = r
	e.src.onList = func() {
		fresh = saveBlobs(t, other, 12, 10) // packs and index object
		e.src.add("new", fresh)             // then the manifest
	}
	p, err := PlanPrune(t.Context(), r, e.src, Options{MaxUnused: 0.05})
	if err != nil {
		t.Fatalf("plan with a snapshot finished at its start: %v", err)
	}
	defer p.Close()
	if len(p.Damaged) != 0 || p.Snapshots != 2 {
		t.Fatalf("plan saw %d snapshots, damaged %+v", p.Snapshots, p.Damaged)
	}
	if _, err := p.Execute(t.Context(), r, e.src, ExecOptions{Lock: lockFor(r)}); err != nil {
		t.Fatal(err)
	}
	loadAll(t, r, append(old, fresh...))
	checkClean(t, r)
}

// gatedSource holds the walks of its first two snapshots until both have
// started; the walk of fail fails as storage does.
type gatedSource struct {
	*fakeSource
	gate    map[blob.ID]bool
	started atomic.Int32
	both    chan struct{}
	fail    blob.ID
}

func (s *gatedSource) Reach(ctx context.Context, id blob.ID, m repo.Marker) error {
	if id == s.fail {
		return errors.New("storage down")
	}
	if s.gate[id] {
		if s.started.Add(1) == 2 {
			close(s.both)
		}
		select {
		case <-s.both:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute): // a guard: the walks ran one at a time
			return fmt.Errorf("snapshot %s: its walk waited a minute alone", id.Short())
		}
	}
	return s.fakeSource.Reach(ctx, id, m)
}

// TestPlanWalksSnapshotsAtOnce: prune's plan walks several snapshots at
// once (from object storage each walk mostly waits for requests), still
// marks what each reaches, and a walk that fails for a reason other than
// damage stops the others and fails the plan with its error.
func TestPlanWalksSnapshotsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ids := saveBlobs(t, r, 5, 40)
	a := e.src.add("a", ids[:10])
	b := e.src.add("b", ids[10:20])
	e.src.add("c", ids[20:30])
	src := &gatedSource{fakeSource: e.src, gate: map[blob.ID]bool{a: true, b: true}, both: make(chan struct{})}
	p, err := PlanPrune(t.Context(), r, src, Options{MaxUnused: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	if p.Snapshots != 3 || len(p.Damaged) != 0 {
		t.Errorf("plan walked %d snapshots, %d damaged; want 3 and none", p.Snapshots, len(p.Damaged))
	}
	p.Close()

	// Damaged snapshots do not stop the others, and are listed in the
	// order of the listing, however the walks end.
	var bad []blob.ID
	for i := range 6 {
		bad = append(bad, e.src.add(fmt.Sprintf("bad%d", i), ids[30+i:31+i]))
	}
	e.src.damaged = map[blob.ID]bool{}
	for _, id := range bad {
		e.src.damaged[id] = true
	}
	src = &gatedSource{fakeSource: e.src, gate: map[blob.ID]bool{bad[0]: true, bad[5]: true}, both: make(chan struct{})}
	p, err = PlanPrune(t.Context(), r, src, Options{})
	if !errors.Is(err, repo.ErrDamaged) || p == nil || p.Snapshots != 3 {
		t.Fatalf("plan with damaged snapshots: %v", err)
	}
	var got []blob.ID
	for _, d := range p.Damaged {
		got = append(got, d.ID)
	}
	if !slices.Equal(got, bad) {
		t.Errorf("damaged listed %v, want %v", got, bad)
	}
	p.Close()
	for _, id := range bad {
		e.src.forget(id)
	}
	e.src.damaged = nil

	// The failure is reported, not the cancellation of the other walks.
	src = &gatedSource{fakeSource: e.src, gate: map[blob.ID]bool{a: true, b: true}, both: make(chan struct{}), fail: e.src.add("d", ids[30:])}
	src.started.Store(-100) // a and b wait until the plan stops them
	if p, err := PlanPrune(t.Context(), r, src, Options{}); err == nil || err.Error() != "storage down" {
		if p != nil {
			p.Close()
		}
		t.Fatalf("a walk failing: %v", err)
	}
}
