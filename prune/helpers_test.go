package prune

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
)

type env struct {
	t     *testing.T
	dir   string
	be    backend.Backend
	cache string
	src   *fakeSource
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvIn(t, storetest.Local(t))
}

// newEnvIn makes the repository in s (dir is its location).
func newEnvIn(t *testing.T, s storetest.Store) *env {
	t.Helper()
	be, _ := repotest.Init(t, repotest.Options{Store: s, Init: repo.InitOptions{PackSize: 1 << 20}})
	return &env{t: t, dir: s.Location, be: be, cache: t.TempDir(), src: &fakeSource{snaps: map[blob.ID][]key{}}}
}

// open opens the repository on be (default: the plain backend) with small packs.
func (e *env) open(be backend.Backend) *repo.Repository {
	e.t.Helper()
	if be == nil {
		be = e.be
	}
	return repotest.Open(e.t, be, repotest.Options{Open: repo.Options{CacheDir: e.cache, PackSize: 64 << 10}})
}

// saveBlobs stores n seeded random data blobs of 1-8 KiB and returns their ids.
func saveBlobs(t *testing.T, r *repo.Repository, seed uint64, n int) []blob.ID {
	t.Helper()
	t.Logf("blobs: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ids := make([]blob.ID, n)
	for i := range ids {
		b := make([]byte, 1024+rng.IntN(7*1024))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		id, _, err := r.SaveBlob(t.Context(), blob.Workspace, blob.Data, b)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ids
}

// survivors returns ids without every n-th one (those at 0, n, 2n, ...):
// a live set that leaves dead blobs in every pack, however the blobs were
// packed.
func survivors(ids []blob.ID, n int) []blob.ID {
	var live []blob.ID
	for i, id := range ids {
		if i%n != 0 {
			live = append(live, id)
		}
	}
	return live
}

// forgetEveryNth saves n seeded blobs into r, adds a snapshot of them all
// and one of survivors(ids, every), forgets the first and returns the
// survivors: every pack holds live and dead blobs.
func (e *env) forgetEveryNth(t *testing.T, r *repo.Repository, seed uint64, n, every int) []blob.ID {
	t.Helper()
	ids := saveBlobs(t, r, seed, n)
	live := survivors(ids, every)
	a := e.src.add("a", ids)
	e.src.add("b", live)
	e.src.forget(a)
	return live
}

// fakeSource stands in for snapshot/: a snapshot is a list of blob keys.
type fakeSource struct {
	mu      sync.Mutex
	snaps   map[blob.ID][]key
	order   []blob.ID
	damaged map[blob.ID]bool
	// onList runs once, at the next Snapshots call (to add a snapshot
	// "concurrently").
	onList func()
	// index, when set, makes Reach look every blob up in that
	// repository's index and report a missing one as damage, as
	// snapshot.Reach does for trees.
	index *repo.Repository
}

func (s *fakeSource) add(name string, ids []blob.ID) blob.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	sid := blob.ID{}
	copy(sid[:], name)
	ks := make([]key, len(ids))
	for i, id := range ids {
		ks[i] = makeKey(blob.Workspace, blob.Data, id)
	}
	s.snaps[sid] = ks
	s.order = append(s.order, sid)
	return sid
}

func (s *fakeSource) forget(sid blob.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.snaps, sid)
	for i, id := range s.order {
		if id == sid {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

func (s *fakeSource) Snapshots(context.Context) ([]blob.ID, error) {
	if s.onList != nil {
		f := s.onList
		s.onList = nil
		f()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]blob.ID(nil), s.order...), nil
}

func (s *fakeSource) Reach(_ context.Context, id blob.ID, m repo.Marker) error {
	s.mu.Lock()
	ks := s.snaps[id]
	bad := s.damaged[id]
	s.mu.Unlock()
	for _, k := range ks {
		if s.index != nil {
			if _, ok, err := s.index.LookupBlob(blob.Tier(k[0]), blob.Type(k[1]), blob.ID(k[2:])); err != nil || !ok {
				return fmt.Errorf("%w: snapshot %s: blob %s is not in the index (%v)", repo.ErrDamaged, id.Short(), blob.ID(k[2:]).Short(), err)
			}
		}
		if err := m.Add(blob.Tier(k[0]), blob.Type(k[1]), blob.ID(k[2:])); err != nil {
			return err
		}
	}
	if bad {
		return fmt.Errorf("%w: snapshot %s: tree 00000000 is not in the index", repo.ErrDamaged, id.Short())
	}
	return nil
}

// lockFor returns an ExecOptions.Lock that takes an exclusive lock without waiting.
func lockFor(r *repo.Repository) func(context.Context) (*repo.Lock, error) {
	return func(ctx context.Context) (*repo.Lock, error) {
		return r.Lock(ctx, repo.LockExclusive, repo.LockOptions{Wait: -1, Refresh: -1})
	}
}

// prune plans and executes with the test source.
func (e *env) prune(r *repo.Repository, o Options) (*Plan, Stats) {
	e.t.Helper()
	p, err := PlanPrune(e.t.Context(), r, e.src, o)
	if err != nil {
		e.t.Fatal(err)
	}
	defer p.Close()
	st, err := p.Execute(e.t.Context(), r, e.src, ExecOptions{Lock: lockFor(r), ForgetDamaged: o.ForgetDamaged})
	if err != nil {
		e.t.Fatal(err)
	}
	// Repacked packs stream through temp files; none may stay behind.
	if left, _ := os.ReadDir(filepath.Join(e.dir, "tmp")); len(left) != 0 {
		e.t.Fatalf("%d temp files left in tmp/ after prune", len(left))
	}
	return p, st
}

// checkClean runs check --read-data and fails on any problem.
func checkClean(t *testing.T, r *repo.Repository) repo.CheckResult {
	t.Helper()
	res, err := r.Check(t.Context(), repo.CheckOptions{ReadData: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) > 0 {
		t.Fatalf("check found problems: %+v", res.Problems)
	}
	return res
}

// recoversAfterFailure opens the repository again after a prune that
// failed and checks that every live blob loads, that it checks clean, and
// that a prune run again leaves it so; it returns the last check.
func (e *env) recoversAfterFailure(t *testing.T, live []blob.ID) repo.CheckResult {
	t.Helper()
	r := e.open(nil)
	loadAll(t, r, live)
	checkClean(t, r)
	e.prune(r, Options{MaxUnused: 0.001})
	loadAll(t, r, live)
	return checkClean(t, r)
}

// loadAll fails unless every blob loads.
func loadAll(t *testing.T, r *repo.Repository, ids []blob.ID) {
	t.Helper()
	for _, id := range ids {
		if _, err := r.LoadBlob(t.Context(), blob.Workspace, blob.Data, id, nil); err != nil {
			t.Fatalf("blob %s: %v", id.Short(), err)
		}
	}
}

var _ = time.Second
