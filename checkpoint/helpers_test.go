package checkpoint

import (
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/internal/repotest"
	"lifeboat/internal/treetest"
	"lifeboat/repo"
	"lifeboat/snapshot/snapshottest"
)

// testRepo is a repository in a temporary directory, with the fault
// wrapper its Repository reads and writes through.
type testRepo struct {
	*repo.Repository
	dir   string
	fault *fault.Backend
}

// newTestRepo makes and opens a repository with every tier.
func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	be, s := repotest.Init(t, repotest.Options{})
	_ = be.Close()
	tr := &testRepo{dir: s.Location}
	tr.Repository, tr.fault = tr.open(t, repotest.Password)
	return tr
}

// open opens the repository again with password, through a new fault
// wrapper.
func (tr *testRepo) open(t *testing.T, password []byte) (*repo.Repository, *fault.Backend) {
	t.Helper()
	be, err := local.Open(tr.dir)
	if err != nil {
		t.Fatal(err)
	}
	fb := fault.Wrap(be)
	t.Cleanup(func() { _ = fb.Close() })
	return repotest.Open(t, fb, repotest.Options{Password: password}), fb
}

// keyRepo adds a key with only tiers and opens the repository with it.
func (tr *testRepo) keyRepo(t *testing.T, tiers ...blob.Tier) *repo.Repository {
	t.Helper()
	pw := []byte("key for " + tiers[len(tiers)-1].String())
	if _, err := tr.AddKey(t.Context(), pw, tiers, repotest.KDF()); err != nil {
		t.Fatal(err)
	}
	r, _ := tr.open(t, pw)
	return r
}

// goneAt makes the next op (fault.OnLoad, fault.OnRemove) on snapshot
// id answer not found, as when another process removed it just before,
// and checks at the end of the test that it did.
func (tr *testRepo) goneAt(t *testing.T, op fault.Op, id blob.ID) {
	t.Helper()
	tr.fault.Add(op).Match(backend.Snapshot).Name(id.String()).Fail(backend.ErrNotFound)
	t.Cleanup(func() { tr.fault.VerifyAllFired(t) })
}

// countSnapshots counts the snapshots of ws in r.
func countSnapshots(t *testing.T, r *repo.Repository, ws string) int {
	return snapshottest.Count(t, r, ws)
}

func writeFiles(t *testing.T, dir string, files map[string]string) { treetest.Write(t, dir, files) }
