package prune

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/internal/repotest"
	"lifeboat/repo"
)

// tempLeft fails the test if a temp file stayed in the repository's tmp/.
func tempLeft(t *testing.T, dir string) {
	t.Helper()
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Fatalf("%d temp files left in tmp/", len(left))
	}
}

// A disk that fills while prune streams its new packs to temp files (the
// write error shows at a later Add or only when the pack is finished,
// since writes are buffered): prune fails with ErrNoSpace, deletes
// nothing, leaves no temp file, every kept blob still loads, and a
// rerun with space finishes the job.
func TestPruneRepackDiskFull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		packSize int
		budget   int64
		where    string // what the error says it was doing
	}{
		// Packs smaller than the write buffer: the error shows at SavePack.
		{"at finish", 64 << 10, 100 << 10, "writing a pack"},
		// Packs larger than it: the error shows at an Add.
		{"at add", 1 << 20, 300 << 10, "adding live blob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.open(nil)
			ids := saveBlobs(t, r, 21, 300)
			live := survivors(ids, 3) // every third blob dies: every pack is repacked
			e.src.add("b", live)
			_ = r.Close(t.Context())
			lb, ok := e.be.(*local.Backend)
			if !ok {
				t.Fatalf("backend is %T", e.be)
			}
			nb := &fault.TempFull{TempBackend: lb}
			nb.Budget.Store(tc.budget)
			rf, err := repo.Open(t.Context(), nb, repotest.Password, repo.Options{CacheDir: e.cache, PackSize: tc.packSize})
			if err != nil {
				t.Fatal(err)
			}
			count := func() int {
				n := 0
				_ = e.be.List(t.Context(), backend.Pack, func(backend.FileInfo) error { n++; return nil })
				return n
			}
			packs := count()
			p, err := PlanPrune(t.Context(), rf, e.src, Options{MaxUnused: 0.001})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Repack) == 0 {
				t.Fatal("nothing to repack")
			}
			st, err := p.Execute(t.Context(), rf, e.src, ExecOptions{Lock: lockFor(rf)})
			p.Close()
			if !errors.Is(err, backend.ErrNoSpace) || strings.Count(err.Error(), "nothing was deleted") != 1 ||
				!strings.Contains(err.Error(), tc.where) {
				t.Fatalf("want a full-disk error saying once that nothing was deleted, got %v", err)
			}
			t.Logf("error: %v (stats %+v)", err, st)
			if count() < packs {
				t.Fatal("packs were deleted after a full disk")
			}
			tempLeft(t, e.dir)
			_ = rf.Close(t.Context())
			e.recoversAfterFailure(t, live)
		})
	}
}
