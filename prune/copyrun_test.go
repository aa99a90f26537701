package prune

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/pack"
	"lifeboat/repo"
)

// sealedRun seals n seeded random blobs of the workspace tier back to back,
// as a loaded range of a pack holds them, and returns the range's bytes
// and entries.
func sealedRun(t *testing.T, r *repo.Repository, seed uint64, n int) ([]byte, []pack.Entry, [][]byte) {
	t.Helper()
	t.Logf("run blobs: seed %d", seed)
	k, err := r.TierKeys(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	var data []byte
	entries := make([]pack.Entry, n)
	plains := make([][]byte, n)
	for i := range entries {
		p := make([]byte, 200+rng.IntN(2000))
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		sb, err := pack.SealBlob(k, blob.Data, k.BlobID(p), p, pack.CompressOff)
		if err != nil {
			t.Fatal(err)
		}
		entries[i] = pack.Entry{Type: sb.Type, Flags: sb.Flags, ID: sb.ID, Offset: uint32(len(data)),
			Length: uint32(len(sb.Data)), PlainLen: sb.PlainLen}
		data = append(data, sb.Data...)
		sb.Release()
		plains[i] = p
	}
	return data, entries, plains
}

// tempLeft fails the test if a temp file stayed in the repository's tmp/.
func tempLeft(t *testing.T, dir string) {
	t.Helper()
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Fatalf("%d temp files left in tmp/", len(left))
	}
}

// copyRun over runs of several groups (full and partial, on one or more
// workers): a blob that does not verify stops the copy before it is
// added, the error names the first bad blob in pack order even when a
// later one fails too, every blob before it was added and none after, and
// the discarded new packs leave no temp file. A clean run copies every
// blob into packs that load back.
func TestCopyRunGroups(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	e := newEnv(t)
	r := e.open(nil)
	k, err := r.TierKeys(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	h := backend.Handle{Type: backend.Pack, Name: "run"}
	for _, procs := range []int{1, 3} {
		runtime.GOMAXPROCS(procs)
		for _, tc := range []struct {
			n   int
			bad []int
		}{
			{200, []int{150, 190}},
			{200, []int{199, 3}},
			{128, []int{64}},
			{128, []int{0}},
			{64, []int{63}},
			{1, []int{0}},
			{200, nil},
			{128, nil},
			{1, nil},
		} {
			t.Run(fmt.Sprintf("procs%d-n%d-bad%v", procs, tc.n, tc.bad), func(t *testing.T) {
				data, run, plains := sealedRun(t, r, uint64(tc.n*7+len(tc.bad)), tc.n)
				first := tc.n
				for _, b := range tc.bad {
					data[run[b].Offset+run[b].Length/2] ^= 0x40
					first = min(first, b)
				}
				sealed := func(e pack.Entry) []byte { return data[e.Offset : e.Offset+e.Length] }
				rw := &rewriter{r: r, st: &Stats{}, writers: map[blob.Tier]*repo.Pack{}, objects: map[blob.Tier]*index.Object{}}
				err := rw.copyRun(t.Context(), k, h, run, sealed)
				if rw.st.BlobsCopied != first {
					t.Fatalf("%d blobs copied, want the %d before the first bad one", rw.st.BlobsCopied, first)
				}
				if len(tc.bad) > 0 {
					for _, w := range rw.writers { // as repackAll's defer does
						r.DiscardPack(w)
					}
					if !errors.Is(err, repo.ErrCorrupt) || !strings.Contains(err.Error(), run[first].ID.Short()) {
						t.Fatalf("want a corruption error naming blob %d (%s), got %v", first, run[first].ID.Short(), err)
					}
					tempLeft(t, e.dir)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := rw.finish(t.Context()); err != nil {
					t.Fatal(err)
				}
				tempLeft(t, e.dir)
				for i, en := range run {
					got, err := r.LoadBlob(t.Context(), blob.Workspace, blob.Data, en.ID, nil)
					if err != nil || string(got) != string(plains[i]) {
						t.Fatalf("copied blob %d (%s): %v", i, en.ID.Short(), err)
					}
				}
			})
		}
	}
}

// A disk that fills while prune streams its new packs to temp files (the
// write error shows at a later Add or only when the pack is finished,
// since writes are buffered): prune fails with ErrNoSpace, deletes
// nothing, leaves no temp file, every kept blob still loads, and a
// rerun with space finishes the job.
func TestPruneRepackDiskFull(t *testing.T) {
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
			rf, err := repo.Open(t.Context(), nb, testPassword, repo.Options{CacheDir: e.cache, PackSize: tc.packSize})
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
			r2 := e.open(nil)
			loadAll(t, r2, live)
			checkClean(t, r2)
			e.prune(r2, Options{MaxUnused: 0.001})
			loadAll(t, r2, live)
			checkClean(t, r2)
		})
	}
}
