package prune

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/internal/repotest"
	"lifeboat/internal/seedtest"
	"lifeboat/repo"
)

// The tests that move time run in a testing/synctest bubble
// (repotest.Bubble): repositories and prunes read the bubble's clock
// (their default, time.Now), and time.Sleep moves it at once, for every
// process of the test alike.

const (
	testSessionLimit = 10 * time.Minute
	testDeleteAfter  = 20 * time.Minute
)

// openProcess opens the repository as another process would: its own
// cache and a short session limit.
func (e *env) openProcess() *repo.Repository {
	e.t.Helper()
	r, err := repo.Open(e.t.Context(), e.be, repotest.Password, repo.Options{CacheDir: e.t.TempDir(), PackSize: 64 << 10,
		SessionLimit: testSessionLimit})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// blobData returns n seeded blobs of 1-8 KiB.
func blobData(t *testing.T, seed uint64, n int) [][]byte {
	t.Logf("blobs: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, 1024+rng.IntN(7*1024))
		for j := range out[i] {
			out[i][j] = byte(rng.Uint32())
		}
	}
	return out
}

// saveAll saves data into r and returns the ids and how many were known.
func saveAll(t *testing.T, r *repo.Repository, data [][]byte) ([]blob.ID, int) {
	t.Helper()
	ids := make([]blob.ID, len(data))
	known := 0
	for i, d := range data {
		id, k, err := r.SaveBlob(t.Context(), blob.Workspace, blob.Data, d)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
		if k {
			known++
		}
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ids, known
}

// twoPhase plans and executes a two-phase prune of r.
func (e *env) twoPhase(r *repo.Repository) (*Plan, Stats) {
	e.t.Helper()
	p, err := PlanPrune(e.t.Context(), r, e.src, Options{MaxUnused: 1e-9, DeleteAfter: testDeleteAfter})
	if err != nil {
		e.t.Fatal(err)
	}
	defer p.Close()
	st, err := p.Execute(e.t.Context(), r, e.src, ExecOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p, st
}

// A capture that reused blobs and then stopped (between its lookups and
// its commit) while a two-phase prune condemned their packs and, a margin
// later, deleted them: its snapshot is either stored in time, and then the
// second prune sees it and keeps what it needs, or refused. Either way
// every stored snapshot's blobs load and check --read-data is clean.
func TestTwoPhasePruneBesideStoppedCapture(t *testing.T) {
	t.Parallel()
	for _, commitInTime := range []bool{true, false} {
		name := "stopped past the margin: refused"
		if commitInTime {
			name = "committed before the delete: kept"
		}
		t.Run(name, func(t *testing.T) {
			repotest.Bubble(t, func(t *testing.T) {
				e := newEnv(t)
				capture, pruner := e.openProcess(), e.openProcess()
				data := blobData(t, 1, 40)
				old, _ := saveAll(t, capture, data)
				e.src.forget(e.src.add("old", old)) // every old blob is unused now

				sess, err := capture.BeginSession(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				reused, known := saveAll(t, capture, data[:10])
				if known != 10 {
					t.Fatalf("the capture reused %d of 10 blobs, want all", known)
				}
				// The capture stops here. A prune condemns every old pack.
				time.Sleep(time.Minute)
				p1, st1 := e.twoPhase(pruner)
				if st1.PacksCondemned == 0 || st1.PacksDeleted != 0 || len(p1.Condemn) == 0 {
					t.Fatalf("first prune: condemned %d, deleted %d; want some condemned, none deleted", st1.PacksCondemned, st1.PacksDeleted)
				}
				commit := func() error {
					return sess.Commit(t.Context(), func(context.Context) error { e.src.add("new", reused); return nil },
						func(context.Context) error { e.src.forget(e.src.add("new", nil)); return nil })
				}
				if commitInTime {
					time.Sleep(testSessionLimit - 2*time.Minute)
					if err := commit(); err != nil {
						t.Fatalf("commit within the limit: %v", err)
					}
				}
				time.Sleep(testDeleteAfter + time.Minute)
				_, st2 := e.twoPhase(pruner)
				if st2.PacksDeleted == 0 {
					t.Fatalf("second prune deleted nothing: %+v", st2)
				}
				if commitInTime {
					if st2.Rescued == 0 {
						t.Fatalf("second prune rescued nothing for the committed snapshot: %+v", st2)
					}
					loadAll(t, pruner, reused)
				} else {
					err := commit()
					if !errors.Is(err, repo.ErrSessionExpired) {
						t.Fatalf("commit after the margin: %v, want ErrSessionExpired", err)
					}
					if ids, _ := e.src.Snapshots(t.Context()); len(ids) != 0 {
						t.Fatalf("the refused snapshot is stored: %d snapshots", len(ids))
					}
				}
				// Every stored snapshot's blobs load, in both processes.
				ids, _ := e.src.Snapshots(t.Context())
				for _, id := range ids {
					for _, k := range e.src.snaps[id] {
						for _, r := range []*repo.Repository{pruner, capture} {
							if _, err := r.BeginSession(t.Context()); err != nil {
								t.Fatal(err)
							}
							if _, err := r.LoadBlob(t.Context(), blob.Workspace, blob.Data, blob.ID(k[2:]), nil); err != nil {
								t.Fatalf("snapshot %s: %v", id.Short(), err)
							}
						}
					}
				}
				checkClean(t, pruner)
			})
		})
	}
}

// A capture that begins after packs were condemned does not reuse them: it
// stores the blobs again, and the prune that deletes the condemned packs
// leaves its snapshot whole.
func TestTwoPhaseCondemnedPacksAreNotReused(t *testing.T) {
	t.Parallel()
	repotest.Bubble(t, func(t *testing.T) {
		e := newEnv(t)
		capture, pruner := e.openProcess(), e.openProcess()
		data := blobData(t, 2, 30)
		old, _ := saveAll(t, capture, data)
		e.src.forget(e.src.add("old", old))
		time.Sleep(time.Minute)
		_, st1 := e.twoPhase(pruner)
		if st1.PacksCondemned == 0 {
			t.Fatal("nothing condemned")
		}
		sess, err := capture.BeginSession(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		again, known := saveAll(t, capture, data[:10])
		if known != 0 {
			t.Fatalf("a capture that began after the condemnation reused %d blobs of condemned packs", known)
		}
		if err := sess.Commit(t.Context(), func(context.Context) error { e.src.add("new", again); return nil }, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(testDeleteAfter + time.Minute)
		_, st2 := e.twoPhase(pruner)
		if st2.PacksDeleted == 0 || st2.CondemnationsRemoved == 0 {
			t.Fatalf("second prune: %+v; want the condemned packs deleted and their condemnation removed", st2)
		}
		loadAll(t, pruner, again)
		if _, err := capture.BeginSession(t.Context()); err != nil {
			t.Fatal(err)
		}
		loadAll(t, capture, again)
		checkClean(t, pruner)
	})
}

// A process stopped after the commit's first check and before its
// snapshot is stored past the limit removes the snapshot again.
func TestSessionCommitChecksAfterTheStore(t *testing.T) {
	t.Parallel()
	repotest.Bubble(t, func(t *testing.T) {
		e := newEnv(t)
		r := e.openProcess()
		sess, err := r.BeginSession(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		stored, undone := false, false
		err = sess.Commit(t.Context(), func(context.Context) error { stored = true; time.Sleep(testSessionLimit + time.Second); return nil },
			func(context.Context) error { undone = true; return nil })
		if !errors.Is(err, repo.ErrSessionExpired) || !stored || !undone {
			t.Fatalf("commit: %v, stored %v, undone %v; want ErrSessionExpired after storing and undoing", err, stored, undone)
		}
	})
}

// A randomised model of captures and two-phase prunes in three processes
// sharing a clock: sessions begin, save blobs (reusing old ones, some
// forgotten), commit or outlive their limit; snapshots are forgotten;
// prunes run; time moves on. After every prune every stored snapshot's
// blobs load, a commit is refused only past the session limit, and at the
// end check --read-data is clean. The seed is logged (-seed replays).
func TestTwoPhaseModel(t *testing.T) {
	t.Parallel()
	repotest.Bubble(t, func(t *testing.T) {
		seed := seedtest.Seed(t)
		rng := seedtest.New(seed)
		e := newEnv(t)
		captures := []*repo.Repository{e.openProcess(), e.openProcess()}
		pruner := e.openProcess()
		pool := blobData(t, seed, 48)
		type session struct {
			r     *repo.Repository
			s     *repo.Session
			start time.Time
			ids   []blob.ID
		}
		var open []*session
		var names []string
		n, refused, deleted, rescued := 0, 0, 0, 0
		verify := func() {
			t.Helper()
			if _, err := pruner.BeginSession(t.Context()); err != nil {
				t.Fatal(err)
			}
			ids, _ := e.src.Snapshots(t.Context())
			for _, id := range ids {
				for _, k := range e.src.snaps[id] {
					if _, err := pruner.LoadBlob(t.Context(), blob.Workspace, blob.Data, blob.ID(k[2:]), nil); err != nil {
						t.Fatalf("seed %d: snapshot %s lost blob %s: %v", seed, id.Short(), blob.ID(k[2:]).Short(), err)
					}
				}
			}
		}
		for range 160 {
			switch op := rng.IntN(6); {
			case op == 0 && len(open) < 3:
				r := captures[rng.IntN(len(captures))]
				s, err := r.BeginSession(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, &session{r: r, s: s, start: time.Now()})
			case op == 1 && len(open) > 0:
				s := open[rng.IntN(len(open))]
				var data [][]byte
				for range 1 + rng.IntN(6) {
					data = append(data, pool[rng.IntN(len(pool))])
				}
				ids, _ := saveAll(t, s.r, data)
				s.ids = append(s.ids, ids...)
			case op == 2 && len(open) > 0:
				i := rng.IntN(len(open))
				s := open[i]
				open = append(open[:i], open[i+1:]...)
				name := fmt.Sprintf("s%d", n)
				n++
				err := s.s.Commit(t.Context(), func(context.Context) error { e.src.add(name, s.ids); return nil },
					func(context.Context) error { t.Fatal("undo without a stop between the checks"); return nil })
				switch late := time.Now().Sub(s.start) > testSessionLimit; {
				case err == nil && !late:
					names = append(names, name)
				case errors.Is(err, repo.ErrSessionExpired) && late:
					refused++
				default:
					t.Fatalf("seed %d: commit after %s: %v", seed, time.Now().Sub(s.start), err)
				}
			case op == 3 && len(names) > 0:
				i := rng.IntN(len(names))
				sid := blob.ID{}
				copy(sid[:], names[i])
				e.src.forget(sid)
				names = append(names[:i], names[i+1:]...)
			case op == 4:
				_, st := e.twoPhase(pruner)
				deleted, rescued = deleted+st.PacksDeleted, rescued+st.Rescued
				verify()
			case op == 5:
				time.Sleep(time.Duration(rng.IntN(15)) * time.Minute)
			}
		}
		time.Sleep(2 * testDeleteAfter)
		_, st := e.twoPhase(pruner)
		verify()
		checkClean(t, pruner)
		t.Logf("%d commits, %d refused, %d packs deleted (%d at the end), %d rescued", n, refused, deleted+st.PacksDeleted, st.PacksDeleted, rescued)
	})
}

// A snapshot another process stores after a prune's last index sync and
// before the prune lists the snapshots again (its blobs in an index
// object written after that sync) is walked, not taken for damaged: the
// prune syncs its index after that listing.
func TestTwoPhaseWalksSnapshotStoredAfterItsSync(t *testing.T) {
	t.Parallel()
	repotest.Bubble(t, func(t *testing.T) {
		e := newEnv(t)
		capture, pruner := e.openProcess(), e.openProcess()
		old, _ := saveAll(t, capture, blobData(t, 3, 20))
		e.src.forget(e.src.add("old", old))
		e.src.index = pruner // Reach fails on a blob the pruner's index lacks
		time.Sleep(time.Minute)
		p, err := PlanPrune(t.Context(), pruner, e.src, Options{MaxUnused: 1e-9, DeleteAfter: testDeleteAfter})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		e.src.onList = func() { // the listing after the prune's sync
			fresh, _ := saveAll(t, capture, blobData(t, 4, 5))
			e.src.add("new", fresh)
		}
		st, err := p.Execute(t.Context(), pruner, e.src, ExecOptions{})
		if err != nil {
			t.Fatalf("prune beside a snapshot stored after its sync: %v", err)
		}
		if st.NewSnapshots != 1 || st.PacksCondemned == 0 {
			t.Fatalf("prune: %+v; want the new snapshot walked and the old packs condemned", st)
		}
	})
}
