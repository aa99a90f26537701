package restore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// Run's memory is bounded by what its plan has expanded, whatever a
// manifest declares. The snapshots here are forged in a
// real repository through its API: trees that share subtrees (a DAG), and
// manifests with inflated, overflowing or missing totals.

// rsDAG stores trees that share subtrees: the bottom tree lists leaf; each
// of the levels above lists fanout directories that all name the tree
// below. It returns the top directory's node, named name.
func rsDAG(r *snaptest.Repo, t testing.TB, name string, fanout, levels int, leaf []snapshot.Node) snapshot.Node {
	t.Helper()
	ctx := context.Background()
	ids, err := snapshot.SaveDir(ctx, r, blob.Workspace, leaf)
	if err != nil {
		t.Fatal(err)
	}
	for range levels {
		nodes := make([]snapshot.Node, fanout)
		for i := range nodes {
			nodes[i] = snapshot.Node{Name: fmt.Appendf(nil, "d%05d", i), Type: snapshot.TypeDir, Mode: 0o755, MtimeNs: snaptest.Mtime, Subtree: ids}
		}
		if ids, err = snapshot.SaveDir(ctx, r, blob.Workspace, nodes); err != nil {
			t.Fatal(err)
		}
	}
	return snapshot.Node{Name: []byte(name), Type: snapshot.TypeDir, Mode: 0o755, MtimeNs: snaptest.Mtime, Subtree: ids}
}

// rsEmptyFiles is n empty regular files.
func rsEmptyFiles(n int) []snapshot.Node {
	nodes := make([]snapshot.Node, n)
	for i := range nodes {
		nodes[i] = snapshot.Node{Name: fmt.Appendf(nil, "f%05d", i), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: snaptest.Mtime}
	}
	return nodes
}

// rsSaveWithTotals saves a snapshot of root whose manifest declares totals,
// and loads it back as restore would.
func rsSaveWithTotals(r *snaptest.Repo, t testing.TB, root snapshot.Node, totals snapshot.Totals) *snapshot.Manifest {
	t.Helper()
	m := r.Manifest(t, root, false)
	m.Totals = totals
	id, err := snapshot.SaveManifest(context.Background(), r, m)
	if err != nil {
		t.Fatal(err)
	}
	m, err = snapshot.LoadManifest(context.Background(), r, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rsPlanRefused restores m under limits and returns the refusal, checking
// it is a PlanLimitError that maps to exit code 13 and names the
// snapshot, and that nothing was written beside the target.
func rsPlanRefused(t *testing.T, r *snaptest.Repo, m *snapshot.Manifest, lim Limits, includes ...string) *PlanLimitError {
	t.Helper()
	parent := t.TempDir()
	target := filepath.Join(parent, "t")
	_, err := Run(WithLimits(t.Context(), lim), r.Repository, m, Options{Target: target, Includes: includes})
	var pe *PlanLimitError
	if !errors.As(err, &pe) || !errors.Is(err, repo.ErrCorrupt) || !errors.Is(err, snapshot.ErrUnsafeEntry) {
		t.Fatalf("restore of a forged snapshot: %v, want a PlanLimitError matching ErrCorrupt and ErrUnsafeEntry", err)
	}
	if !strings.Contains(err.Error(), "snapshot "+m.ID.Short()) {
		t.Errorf("the refusal does not name snapshot %s: %v", m.ID.Short(), err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("a refused restore left %v beside the target", ents)
	}
	t.Logf("refused after %d entries, %d bytes counted: %v", pe.Entries, pe.Bytes, err)
	return pe
}

// TestRestoreDAGBombInflatedTotals is the campaign's attack: 2048
// directories that all name one tree of 2048 directories that all name one
// tree of empty files, 2048^2 (4.2 million) entries from three tree blobs,
// under a manifest that declares 2^62 entries. It is refused before a
// single entry is expanded, with the default limits.
func TestRestoreDAGBombInflatedTotals(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	root := rsDAG(r, t, "", 2048, 1, rsEmptyFiles(2048))
	m := rsSaveWithTotals(r, t, root, snapshot.Totals{Files: 1 << 62, Dirs: 2049})
	pe := rsPlanRefused(t, r, m, Limits{})
	if pe.Limit != "entries" || pe.Entries != 0 || pe.Declared != 1<<62+2049 || pe.Limits != DefaultLimits {
		t.Errorf("refusal %+v, want the declared entries refused before expanding, against the defaults", pe)
	}
	// Totals that overflow when added are not taken as "none declared".
	m = rsSaveWithTotals(r, t, root, snapshot.Totals{Files: math.MaxUint64, Dirs: 2})
	if pe := rsPlanRefused(t, r, m, Limits{}); pe.Entries != 0 || pe.Declared != math.MaxUint64 {
		t.Errorf("overflowing totals: refusal %+v, want refused before expanding", pe)
	}
}

// TestRestoreDAGBombCounted: a DAG of a million entries whose manifest
// does not give it away (totals just under the limit, none at all, or a
// restore of a part with --include) is refused as soon as the plan has
// expanded one entry more than a bound, counted, not timed.
func TestRestoreDAGBombCounted(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	root := rsDAG(r, t, "", 1000, 2, rsEmptyFiles(1000)) // 1000 + 1000^2 + 1000^3 entries
	lim := Limits{Entries: 50_000}
	t.Run("totals under the limit", func(t *testing.T) {
		m := rsSaveWithTotals(r, t, root, snapshot.Totals{Files: 40_000, Dirs: 9_999})
		pe := rsPlanRefused(t, r, m, lim)
		if pe.Limit != "declared" || pe.Entries != 50_000 {
			t.Errorf("refusal %+v, want the declared 49,999 entries passed at entry 50,000", pe)
		}
	})
	t.Run("no totals", func(t *testing.T) {
		m := rsSaveWithTotals(r, t, root, snapshot.Totals{})
		pe := rsPlanRefused(t, r, m, lim)
		if pe.Limit != "entries" || pe.Entries != lim.Entries+1 {
			t.Errorf("refusal %+v, want the limit passed at entry %d", pe, lim.Entries+1)
		}
	})
	t.Run("include", func(t *testing.T) {
		m := rsSaveWithTotals(r, t, root, snapshot.Totals{Files: 1 << 62})
		pe := rsPlanRefused(t, r, m, lim, "d00007")
		if pe.Limit != "entries" || pe.Entries != lim.Entries+1 {
			t.Errorf("refusal %+v, want the limit passed at entry %d", pe, lim.Entries+1)
		}
	})
}

// TestRestoreBytesBomb: few entries that carry much (extended attributes,
// chunk references), repeated through shared subtrees, are refused by the
// byte bound once the plan holds more than it allows, whatever the entry
// count.
func TestRestoreBytesBomb(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	val := make([]byte, 60<<10)
	var xattrs []snapshot.Xattr
	for i := range 16 {
		xattrs = append(xattrs, snapshot.Xattr{Name: fmt.Sprintf("user.x%02d", i), Value: val})
	}
	fat := snapshot.Node{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: snaptest.Mtime, Xattrs: xattrs}
	chunk := r.SaveChunk(t, []byte("x"))
	refs := make([]blob.ID, 20_000)
	for i := range refs {
		refs[i] = chunk
	}
	many := snapshot.Node{Name: []byte("g"), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: snaptest.Mtime, Size: uint64(len(refs)), Content: refs}
	lim := Limits{Entries: 1 << 30, Bytes: 16 << 20}
	for _, tc := range []struct {
		name string
		leaf snapshot.Node
	}{{"xattrs", fat}, {"chunk refs", many}} {
		t.Run(tc.name, func(t *testing.T) {
			root := rsDAG(r, t, "", 2048, 1, []snapshot.Node{tc.leaf}) // 2048 copies of about 1 MB (xattrs) or 6 MB (refs)
			m := rsSaveWithTotals(r, t, root, snapshot.Totals{Files: 1 << 20})
			pe := rsPlanRefused(t, r, m, lim)
			one := rsNodeBytes("d00000/"+string(tc.leaf.Name), &tc.leaf)
			if pe.Limit != "bytes" || pe.Bytes <= lim.Bytes || pe.Bytes > lim.Bytes+one || pe.Entries > 2*(lim.Bytes/one+1)+1 {
				t.Errorf("refusal %+v, want the %d-byte limit passed by at most one entry (%d bytes)", pe, lim.Bytes, one)
			}
		})
	}
}

// TestRestoreLargeSharedSnapshot: a legitimate snapshot of 200,000 small
// files in 200 identical directories that share one tree blob, with
// honest totals, plans within the default limits. What the plan is counted
// to hold is checked against the heap it really holds (measured after a
// collection, with the plan alive), so the byte bound bounds memory. Not
// parallel: other tests' allocations would be measured too.
func TestRestoreLargeSharedSnapshot(t *testing.T) {
	r := snaptest.NewRepo(t)
	data := []byte("small file\n")
	root, totals := rsSmallFiles(r, t, 200, 1000, data)
	m := rsSaveWithTotals(r, t, root, totals)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	plan, err := rsPlanTree(t.Context(), r, blob.Workspace, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.planChunks(r, blob.Workspace); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	counted := plan.expanded.bytes
	t.Logf("plan of %d entries: %d bytes counted (%d per entry), %d bytes of heap held", plan.expanded.entries, counted,
		counted/plan.expanded.entries, held)
	if plan.expanded.entries != 200_201 || len(plan.entries) != 200_201 || len(plan.files) != 200_000 {
		t.Fatalf("expanded %d entries, planned %d, %d files; want 200,201 and 200,000", plan.expanded.entries, len(plan.entries), len(plan.files))
	}
	if held > int64(counted) {
		t.Errorf("the plan holds %d bytes of heap but was counted at %d: the byte bound does not bound memory", held, counted)
	}
	if counted > 4*uint64(max(held, 1)) {
		t.Errorf("the plan was counted at %d bytes, more than 4 times the %d it holds", counted, held)
	}
	if counted >= DefaultLimits.Bytes/4 || plan.expanded.entries >= DefaultLimits.Entries/4 {
		t.Errorf("200,000 small files use more than a quarter of the default limits %+v", DefaultLimits)
	}
	runtime.KeepAlive(plan)
}

// TestRestoreAtTheLimit: a legitimate snapshot of exactly as many entries
// as the limit allows restores in full (every file read back). With one
// entry fewer allowed, its manifest's honest totals refuse it before
// anything is expanded; without totals, it is refused at the entry one
// past the limit.
func TestRestoreAtTheLimit(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	data := []byte("small file\n")
	root, totals := rsSmallFiles(r, t, 50, 100, data)
	m := rsSaveWithTotals(r, t, root, totals)
	n := totals.Files + totals.Dirs // 5,051

	target := filepath.Join(t.TempDir(), "t")
	res, err := Run(WithLimits(t.Context(), Limits{Entries: n}), r.Repository, m, Options{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != totals.Files || res.Dirs != totals.Dirs {
		t.Fatalf("restored %d files, %d dirs; want %+v", res.Files, res.Dirs, totals)
	}
	for d := range 50 {
		for f := range 100 {
			p := filepath.Join(target, fmt.Sprintf("d%05d/file-%05d.txt", d, f))
			if b, err := os.ReadFile(p); err != nil || string(b) != string(data) {
				t.Fatalf("%s: %q, %v", p, b, err)
			}
		}
	}
	pe := rsPlanRefused(t, r, m, Limits{Entries: n - 1})
	if pe.Limit != "entries" || pe.Entries != 0 || pe.Declared != n {
		t.Errorf("refusal %+v, want the declared %d entries refused before expanding", pe, n)
	}
	m = rsSaveWithTotals(r, t, root, snapshot.Totals{}) // as if written without totals
	pe = rsPlanRefused(t, r, m, Limits{Entries: n - 1})
	if pe.Limit != "entries" || pe.Entries != n {
		t.Errorf("refusal %+v, want the limit of %d passed at entry %d", pe, n-1, n)
	}
	plan, err := rsPlanTree(WithLimits(t.Context(), Limits{Entries: n}), r, blob.Workspace, m, nil)
	if err != nil || plan.expanded.entries != n {
		t.Fatalf("plan at the limit: %v", err)
	}
}

// rsSmallFiles stores dirs identical directories of files small files with
// content data (one chunk, shared) and returns the root and its honest
// totals.
func rsSmallFiles(r *snaptest.Repo, t testing.TB, dirs, files int, data []byte) (snapshot.Node, snapshot.Totals) {
	t.Helper()
	chunk := r.SaveChunk(t, data)
	leaf := make([]snapshot.Node, files)
	for i := range leaf {
		leaf[i] = snapshot.Node{Name: fmt.Appendf(nil, "file-%05d.txt", i), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: snaptest.Mtime,
			Size: uint64(len(data)), Content: []blob.ID{chunk}}
	}
	n := uint64(dirs * files)
	return rsDAG(r, t, "", dirs, 1, leaf), snapshot.Totals{Files: n, Dirs: uint64(dirs) + 1, Bytes: n * uint64(len(data))}
}
