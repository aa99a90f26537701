package restore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/internal/seedtest"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// rsCountingLoader counts the loads of each blob and how many are in
// flight; block, when set, holds every load of that blob until released.
type rsCountingLoader struct {
	l        rsFakeLoader
	mu       sync.Mutex
	loads    map[blob.ID]int
	inFlight atomic.Int64
	block    blob.ID
	blocked  chan struct{} // closed when a load of block starts
	once     sync.Once
}

func (c *rsCountingLoader) LoadBlob(ctx context.Context, t blob.Tier, typ blob.Type, id blob.ID, buf []byte) ([]byte, error) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	c.mu.Lock()
	c.loads[id]++
	c.mu.Unlock()
	if !c.block.IsNull() && id == c.block {
		c.once.Do(func() { close(c.blocked) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return c.l.LoadBlob(ctx, t, typ, id, buf)
}

// rsGenDirs builds a random directory tree as tree blobs in l: directories
// split over several blobs, files, and subtrees shared by two parents. It
// returns the root's subtree, the paths a depth-first walk visits, and
// how many times the walk loads each blob.
type rsGenDirs struct {
	rng   *rand.Rand
	l     rsFakeLoader
	next  uint64
	dirs  [][]blob.ID // earlier directories' subtrees, for sharing
	paths map[string][]string
}

// dir returns the subtree of a new directory and the relative paths below
// it in walk order.
func (g *rsGenDirs) dir(depth int) ([]blob.ID, []string) {
	if depth > 1 && len(g.dirs) > 0 && g.rng.IntN(8) == 0 { // share an earlier directory
		sub := g.dirs[g.rng.IntN(len(g.dirs))]
		return sub, g.paths[rsSubKey(sub)]
	}
	n := g.rng.IntN(12)
	if depth == 0 {
		n += 4
	}
	names := make([]string, 0, n)
	for i := range n {
		names = append(names, fmt.Sprintf("e%02d-%d", i, g.rng.IntN(100)))
	}
	slices.Sort(names)
	var nodes []snapshot.Node
	var paths []string
	for _, name := range names {
		if depth < 5 && g.rng.IntN(3) == 0 {
			sub, below := g.dir(depth + 1)
			nodes = append(nodes, snapshot.Node{Name: []byte(name), Type: snapshot.TypeDir, Mode: 0o755, Subtree: sub})
			paths = append(paths, name)
			for _, p := range below {
				paths = append(paths, name+"/"+p)
			}
			continue
		}
		nodes = append(nodes, snapshot.Node{Name: []byte(name), Type: snapshot.TypeFile, Mode: 0o644})
		paths = append(paths, name)
	}
	var sub []blob.ID
	for len(nodes) > 0 || len(sub) == 0 { // an empty directory has one empty blob
		k := min(len(nodes), 1+g.rng.IntN(5))
		var id blob.ID
		g.next++
		copy(id[:], strconv.FormatUint(g.next, 10))
		b, err := snapshot.EncodeTree(nodes[:k])
		if err != nil {
			panic(err)
		}
		g.l[id] = b
		sub = append(sub, id)
		nodes = nodes[k:]
	}
	g.dirs = append(g.dirs, sub)
	g.paths[rsSubKey(sub)] = paths
	return sub, paths
}

func rsSubKey(sub []blob.ID) string {
	var b strings.Builder
	for _, id := range sub {
		b.Write(id[:])
	}
	return b.String()
}

// rsCountRefs counts the loads a walk of sub makes of each blob.
func rsCountRefs(l rsFakeLoader, sub []blob.ID, refs map[blob.ID]int) {
	for _, id := range sub {
		refs[id]++
		t, err := snapshot.DecodeTree(l[id])
		if err != nil {
			panic(err)
		}
		for _, n := range t.Nodes {
			if n.Type == snapshot.TypeDir {
				rsCountRefs(l, n.Subtree, refs)
			}
		}
	}
}

// TestRestorePlanTreesAhead plans random trees (seed logged; replay with
// -seed) with the trees loaded ahead under bounds from tiny
// to the default: the plan visits exactly the paths of a depth-first walk,
// in its order, each tree blob is loaded once per time the walk lists it,
// and no load is left running. Not parallel: it sets the bounds, package
// variables every restore reads.
func TestRestorePlanTreesAhead(t *testing.T) {
	rng := seedtest.Rand(t)
	defer func(b snapshot.AheadBounds) { rsAhead = b }(rsAhead)
	for round := range 12 {
		g := &rsGenDirs{rng: rng, l: rsFakeLoader{}, paths: map[string][]string{}}
		sub, want := g.dir(0)
		refs := map[blob.ID]int{}
		rsCountRefs(g.l, sub, refs)
		rsAhead.Trees, rsAhead.Nodes = 1+rng.IntN(6), 1+rng.IntN(40)
		if round%4 == 3 {
			rsAhead = snapshot.DefaultAheadBounds
		}
		cl := &rsCountingLoader{l: g.l, loads: map[blob.ID]int{}}
		m := &snapshot.Manifest{Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o755, Subtree: sub}}
		plan, err := rsPlanTree(t.Context(), cl, blob.Workspace, m, nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var got []string
		for _, e := range plan.entries[1:] {
			got = append(got, e.path)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d (bounds %d trees, %d nodes): planned\n%q\nwant\n%q", round, rsAhead.Trees, rsAhead.Nodes, got, want)
		}
		if n := cl.inFlight.Load(); n != 0 {
			t.Errorf("round %d: %d loads still running after the plan", round, n)
		}
		cl.mu.Lock()
		for id, n := range refs {
			if cl.loads[id] != n {
				t.Errorf("round %d (bounds %d, %d): tree %x loaded %d times, listed %d times", round, rsAhead.Trees, rsAhead.Nodes, id[:4], cl.loads[id], n)
			}
		}
		cl.mu.Unlock()
		t.Logf("round %d: %d entries, %d tree blobs, bounds %d trees %d nodes", round, len(want), len(refs), rsAhead.Trees, rsAhead.Nodes)
	}
}

// TestRestorePlanTreesAheadErrors: a tree loaded ahead that is missing or
// does not decode fails the plan naming its directory, as one loaded by
// the walk does; a cancelled plan returns with no load left running.
func TestRestorePlanTreesAheadErrors(t *testing.T) {
	t.Parallel()
	var root, a, b, c blob.ID
	root[0], a[0], b[0], c[0] = 1, 2, 3, 4
	l := rsFakeLoader{
		root: rsMustEncode(t, []snapshot.Node{
			{Name: []byte("a"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{a}},
			{Name: []byte("b"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{b}},
		}),
		a: rsMustEncode(t, []snapshot.Node{{Name: []byte("x"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{c}}}),
		b: rsMustEncode(t, []snapshot.Node{{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o644}}),
		c: []byte("{not a tree"),
	}
	m := &snapshot.Manifest{Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{root}}}
	_, err := rsPlanTree(t.Context(), l, blob.Workspace, m, nil)
	if !errors.Is(err, snapshot.ErrUnsafeEntry) || !strings.Contains(err.Error(), `"a/x"`) {
		t.Errorf("undecodable tree: %v", err)
	}
	delete(l, c)
	_, err = rsPlanTree(t.Context(), l, blob.Workspace, m, nil)
	if !errors.Is(err, repo.ErrBlobNotFound) || !strings.Contains(err.Error(), `"a/x"`) {
		t.Errorf("missing tree: %v", err)
	}

	// b is loaded ahead while the walk is below a; the load blocks until
	// the plan is cancelled.
	l[c] = rsMustEncode(t, nil)
	cl := &rsCountingLoader{l: l, loads: map[blob.ID]int{}, block: b, blocked: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := rsPlanTree(ctx, cl, blob.Workspace, m, nil)
		done <- err
	}()
	<-cl.blocked
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled plan: %v", err)
	}
	if n := cl.inFlight.Load(); n != 0 {
		t.Errorf("%d loads still running after the cancelled plan returned", n)
	}
}

// TestRestorePlanLoadsAhead: while the load of the first directory's tree
// is held, the second one's is made by another goroutine (which the walk,
// held on the first, could not do itself).
func TestRestorePlanLoadsAhead(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var root, a, b blob.ID
	root[0], a[0], b[0] = 1, 2, 3
	l := rsFakeLoader{
		root: rsMustEncode(t, []snapshot.Node{
			{Name: []byte("a"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{a}},
			{Name: []byte("b"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{b}},
		}),
		a: rsMustEncode(t, nil),
		b: rsMustEncode(t, nil),
	}
	bLoaded := make(chan struct{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard: fails rather than hangs
	defer cancel()
	hl := rsHookLoader{l: l, hook: func(id blob.ID) error {
		switch id {
		case a:
			select {
			case <-bLoaded:
			case <-ctx.Done():
				return errors.New("the second directory's tree was not loaded while the first one's was held")
			}
		case b:
			close(bLoaded)
		}
		return nil
	}}
	m := &snapshot.Manifest{Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{root}}}
	if _, err := rsPlanTree(ctx, hl, blob.Workspace, m, nil); err != nil {
		t.Fatal(err)
	}
}

// rsHookLoader calls hook before each load; its error fails the load.
type rsHookLoader struct {
	l    rsFakeLoader
	hook func(blob.ID) error
}

func (h rsHookLoader) LoadBlob(ctx context.Context, t blob.Tier, typ blob.Type, id blob.ID, buf []byte) ([]byte, error) {
	if err := h.hook(id); err != nil {
		return nil, err
	}
	return h.l.LoadBlob(ctx, t, typ, id, buf)
}

// TestRestorePlanReadsTreesTogether: the trees a restore plans are read a
// batch at a time, each pack's in as few reads as the gaps between them
// allow, not one read each (a request each on S3); the tree restored is
// the one saved.
func TestRestorePlanReadsTreesTogether(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	root, dirs := r.WideTree(t)
	m := r.Manifest(t, root, true)
	r2, reads := r.Reopen(t)
	target := filepath.Join(t.TempDir(), "t")
	res, err := Run(t.Context(), r2, m, Options{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dirs != uint64(dirs) || res.Files != 6*6*6 {
		t.Errorf("restored %d directories and %d files, want %d and %d", res.Dirs, res.Files, dirs, 6*6*6)
	}
	if _, err := os.Stat(filepath.Join(target, "d5", "d5", "d5", "f-5-5-5")); err != nil {
		t.Error(err)
	}
	loads := reads.Count()
	// The empty files have no content: every read is of trees.
	if loads*4 > dirs {
		t.Errorf("%d reads for %d tree blobs, want at most one for 4", loads, dirs)
	}
	t.Logf("%d tree blobs in %d packs, %d reads", dirs, len(reads.Ranges()), loads)
}

// TestRestorePlanDamagedTreesInBatch: a tree read in a batch with its
// siblings that does not verify, whose pack is gone, that is not indexed
// or that does not decode fails the plan naming its directory, as a tree
// read alone does; nothing is written.
func TestRestorePlanDamagedTreesInBatch(t *testing.T) {
	t.Parallel()
	var ghost blob.ID
	ghost[0] = 0xee
	cases := []struct {
		name   string
		victim func(t *testing.T, r *snaptest.Repo) (snapshot.Node, func())
		is     error
	}{
		{"does not verify", func(t *testing.T, r *snaptest.Repo) (snapshot.Node, func()) {
			n := r.Dir(t, "v", r.File(t, "f", []byte("victim")))
			return n, func() { rsDamageBlob(t, r, n.Subtree[0], false) }
		}, repo.ErrCorrupt},
		{"pack gone", func(t *testing.T, r *snaptest.Repo) (snapshot.Node, func()) {
			n := r.Dir(t, "v", r.File(t, "f", []byte("victim")))
			if err := r.Flush(t.Context()); err != nil { // a pack of its own
				t.Fatal(err)
			}
			return n, func() { rsDamageBlob(t, r, n.Subtree[0], true) }
		}, repo.ErrPackMissing},
		{"not indexed", func(t *testing.T, r *snaptest.Repo) (snapshot.Node, func()) {
			return snapshot.Node{Name: []byte("v"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{ghost}}, func() {}
		}, repo.ErrBlobNotFound},
		{"does not decode", func(t *testing.T, r *snaptest.Repo) (snapshot.Node, func()) {
			id, _, err := r.SaveBlob(t.Context(), blob.Workspace, blob.Tree, []byte("{not a tree"))
			if err != nil {
				t.Fatal(err)
			}
			return snapshot.Node{Name: []byte("v"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{id}}, func() {}
		}, snapshot.ErrUnsafeEntry},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := snaptest.NewRepo(t)
			victim, damage := tc.victim(t, r)
			nodes := []snapshot.Node{victim}
			for i := range 12 {
				name := fmt.Sprintf("s%02d", i)
				nodes = append(nodes, r.Dir(t, name, r.Dir(t, "sub", r.File(t, "f"+name, []byte(name)))))
			}
			m := r.Manifest(t, r.Dir(t, "root", nodes...), true)
			damage()
			parent := t.TempDir()
			_, err := Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(parent, "t")})
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), `"v"`) {
				t.Errorf("got %v, want %v naming v", err, tc.is)
			}
			if ents, err := os.ReadDir(parent); err != nil || len(ents) != 0 {
				t.Errorf("left in the target's parent: %v %v", ents, err)
			}
		})
	}
}

// rsDamageBlob flips a bit of blob id's sealed bytes in its pack, or
// removes the pack when gone is set.
func rsDamageBlob(t *testing.T, r *snaptest.Repo, id blob.ID, gone bool) {
	t.Helper()
	loc, ok, err := r.LookupBlob(blob.Workspace, blob.Tree, id)
	if err != nil || !ok {
		t.Fatalf("tree %s: %v %v", id.Short(), ok, err)
	}
	name := loc.Pack.String()
	p := filepath.Join(r.Path, "data", name[:2], name)
	if gone {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[loc.Offset+30] ^= 0x04
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRestorePlanTreesAheadBounded: with bounds a few trees wide, batches
// taken from a repository are cut to the bounds and their trees queued
// again, and the walk still plans every entry in order.
func TestRestorePlanTreesAheadBounded(t *testing.T) {
	defer func(b snapshot.AheadBounds) { rsAhead = b }(rsAhead)
	r := snaptest.NewRepo(t)
	root, dirs := r.WideTree(t)
	m := r.Manifest(t, root, true)
	var want []string
	for _, bounds := range []snapshot.AheadBounds{snapshot.DefaultAheadBounds, {Trees: 3, Nodes: 1 << 16, Bytes: 64 << 20}, {Trees: 4096, Nodes: 1 << 16, Bytes: 600}, {Trees: 2, Nodes: 20, Bytes: 300}} {
		rsAhead = bounds
		plan, err := rsPlanTree(t.Context(), r.Repository, blob.Workspace, m, nil)
		if err != nil {
			t.Fatalf("bounds %v: %v", bounds, err)
		}
		var got []string
		for _, e := range plan.entries[1:] {
			got = append(got, e.path)
		}
		if want == nil {
			want = got
			if plan.dirs != uint64(dirs) {
				t.Fatalf("planned %d directories, want %d", plan.dirs, dirs)
			}
		} else if !slices.Equal(got, want) {
			t.Errorf("bounds %v: planned %d entries, differently from unbounded", bounds, len(got))
		}
	}
}

// rsTreeLog is a repository that records every tree blob it loads, alone
// or in a pack's stream.
type rsTreeLog struct {
	*repo.Repository
	mu     sync.Mutex
	loaded map[blob.ID]bool
}

func (l *rsTreeLog) record(id blob.ID) {
	l.mu.Lock()
	l.loaded[id] = true
	l.mu.Unlock()
}

func (l *rsTreeLog) LoadBlob(ctx context.Context, t blob.Tier, typ blob.Type, id blob.ID, buf []byte) ([]byte, error) {
	l.record(id)
	return l.Repository.LoadBlob(ctx, t, typ, id, buf)
}

func (l *rsTreeLog) ReadPlaces(ctx context.Context, t blob.Tier, locs []repo.Location, o repo.StreamOptions, parallel int, fn func(i int, plain []byte)) {
	l.Repository.ReadPlaces(ctx, t, locs, o, parallel, func(i int, plain []byte) {
		l.record(locs[i].ID)
		fn(i, plain)
	})
}

// TestRestoreIncludeLoadsAheadOnlyIncluded: a restore of some directories
// of a snapshot loads their trees ahead, and never those of a directory
// excluded from a listing the walk loads itself (the root's). It plans
// only what the includes name.
func TestRestoreIncludeLoadsAheadOnlyIncluded(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	root, _ := r.WideTree(t)
	m := r.Manifest(t, root, true)
	l := &rsTreeLog{Repository: r.Repository, loaded: map[blob.ID]bool{}}
	plan, err := rsPlanTree(t.Context(), l, blob.Workspace, m, []string{"d1", "d3/d2"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range plan.entries[1:] {
		if e.node.Type == snapshot.TypeFile {
			got = append(got, e.path)
		}
	}
	if len(got) != 36+6 || !slices.Contains(got, "d1/d5/d5/f-1-5-5") || !slices.Contains(got, "d3/d2/d4/f-3-2-4") {
		t.Fatalf("planned %d files: %q", len(got), got)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	excluded := 0
	var walk func(subtree []blob.ID, path string)
	walk = func(subtree []blob.ID, path string) {
		err := snapshot.LoadDir(t.Context(), r, blob.Workspace, subtree, func(n *snapshot.Node) error {
			if n.Type != snapshot.TypeDir {
				return nil
			}
			p := snapshot.JoinPath(path, string(n.Name))
			if l.loaded[n.Subtree[0]] {
				t.Errorf("the tree of %s, not included, was loaded", p)
			}
			excluded++
			walk(n.Subtree, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	top, err := snapshot.LoadTree(t.Context(), r, blob.Workspace, root.Subtree[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range top.Nodes {
		if name := string(n.Name); name != "d1" && name != "d3" {
			if l.loaded[n.Subtree[0]] {
				t.Errorf("the tree of %s, not included, was loaded", name)
			}
			walk(n.Subtree, name)
		}
	}
	t.Logf("%d trees loaded; none of the %d excluded at the root", len(l.loaded), excluded+4)
}
