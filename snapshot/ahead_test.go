package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// oneAtATime hides that a repository reads many blobs at once.
type oneAtATime struct{ l snapshot.BlobLoader }

func (o oneAtATime) LoadBlob(ctx context.Context, t blob.Tier, typ blob.Type, id blob.ID, buf []byte) ([]byte, error) {
	return o.l.LoadBlob(ctx, t, typ, id, buf)
}

func mustEncode(t *testing.T, nodes []snapshot.Node) []byte {
	t.Helper()
	b, err := snapshot.EncodeTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDecode(t *testing.T, b []byte) *snapshot.Tree {
	t.Helper()
	tr, err := snapshot.DecodeTree(b)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTreesAheadBytes: trees of one entry each carrying a large extended
// attribute (as a forged snapshot could) stop the loaders at the byte
// bound, not at the tree or entry bounds: once the loaders have stopped,
// what waits for the walk is at least the bound and at most one tree per
// loader past it. Taking the trees in order then gives each back and
// releases every counter.
func TestTreesAheadBytes(t *testing.T) {
	bounds := snapshot.AheadBounds{Trees: 4096, Nodes: 1 << 16, Bytes: 256 << 10}
	// One tree at a time from a loader, a batch at a time from a
	// repository.
	fake := snaptest.Blobs{}
	r := snaptest.NewRepo(t)
	for _, tc := range []struct {
		name string
		l    snapshot.BlobLoader
		save func(i int, b []byte) blob.ID
	}{
		{"loader", fake, func(i int, b []byte) blob.ID {
			var id blob.ID
			id[0], id[1] = 1, byte(i)
			fake[id] = b
			return id
		}},
		{"repository", r.Repository, func(_ int, b []byte) blob.ID {
			id, _, err := r.SaveBlob(t.Context(), blob.Workspace, blob.Tree, b)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rootNodes []snapshot.Node
			var ids []blob.ID
			treeSize := 0
			for i := range 200 {
				b := mustEncode(t, []snapshot.Node{{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o644,
					Xattrs: []snapshot.Xattr{{Name: "user.big", Value: bytes.Repeat([]byte{byte(i)}, 32<<10)}}}})
				treeSize = max(treeSize, len(b))
				id := tc.save(i, b)
				ids = append(ids, id)
				rootNodes = append(rootNodes, snapshot.Node{Name: fmt.Appendf(nil, "d%03d", i), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{id}})
			}
			if err := r.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			root := mustDecode(t, mustEncode(t, rootNodes))

			s := snapshot.NewTreesAhead(t.Context(), tc.l, blob.Workspace, bounds, nil)
			defer s.Stop()
			s.QueueForTest(root)
			s.WaitLoadersForTest() // the loaders stop when the bound is reached: nothing takes
			h := s.HeldForTest()
			limit := bounds.Bytes + runtime.GOMAXPROCS(0)*treeSize
			if h.Bytes < bounds.Bytes || h.Bytes > limit || h.Loaded >= len(ids) {
				t.Fatalf("loaders stopped with %d bytes in %d trees held ahead; want %d..%d bytes and fewer than %d trees",
					h.Bytes, h.Loaded, bounds.Bytes, limit, len(ids))
			}
			t.Logf("held ahead: %d bytes in %d trees (bound %d bytes, trees of %d bytes)", h.Bytes, h.Loaded, bounds.Bytes, treeSize)

			for i, id := range ids {
				tr, err := s.Load(t.Context(), id)
				if err != nil {
					t.Fatalf("tree %d: %v", i, err)
				}
				if len(tr.Nodes) != 1 || len(tr.Nodes[0].Xattrs) != 1 || tr.Nodes[0].Xattrs[0].Value[0] != byte(i) {
					t.Fatalf("tree %d: got %+v", i, tr.Nodes)
				}
			}
			s.Stop()
			if h := s.HeldForTest(); h.Loaded != 0 || h.Nodes != 0 || h.Bytes != 0 || h.Flying != 0 || h.Loads != 0 {
				t.Errorf("after every tree was taken: %+v still held", h)
			}
		})
	}
}

// flushedWideTree saves snaptest's wide tree (259 directories) and
// flushes it.
func flushedWideTree(t *testing.T) (*snaptest.Repo, snapshot.Node, int) {
	t.Helper()
	r := snaptest.NewRepo(t)
	root, dirs := r.WideTree(t)
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r, root, dirs
}

// takeAll takes every tree under subtree from s, depth first (the last
// subdirectory first when backwards), calls after once after each, and
// returns how many it took.
func takeAll(t *testing.T, s *snapshot.TreesAhead, subtree []blob.ID, backwards bool, after func(took int)) int {
	t.Helper()
	took := 0
	var walk func(subtree []blob.ID)
	walk = func(subtree []blob.ID) {
		for _, id := range subtree {
			tr, err := s.Load(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			took++
			after(took)
			for i := range tr.Nodes {
				if backwards {
					i = len(tr.Nodes) - 1 - i
				}
				if tr.Nodes[i].Type == snapshot.TypeDir {
					walk(tr.Nodes[i].Subtree)
				}
			}
		}
	}
	walk(subtree)
	return took
}

// TestTreesAheadForget: trees the walk gives up (a directory it skips)
// stop counting against the bounds, with what was loaded below them, so
// the loaders go on with the trees it does take.
func TestTreesAheadForget(t *testing.T) {
	t.Parallel()
	r, root, dirs := flushedWideTree(t)
	for _, l := range []snapshot.BlobLoader{r.Repository, oneAtATime{r.Repository}} {
		s := snapshot.NewTreesAhead(t.Context(), l, blob.Workspace, snapshot.AheadBounds{Trees: 20, Nodes: 1 << 16, Bytes: 64 << 20}, nil)
		defer s.Stop()
		top, err := s.Load(t.Context(), root.Subtree[0])
		if err != nil {
			t.Fatal(err)
		}
		s.WaitLoadersForTest()
		if h := s.HeldForTest(); h.Loaded < 20 || h.Loaded >= dirs {
			t.Fatalf("%T: loaders stopped with %+v held; want the bound of 20 trees", l, h)
		}
		// The walk skips d0 to d4 and takes d5's trees: they come.
		for _, n := range top.Nodes[:5] {
			s.Forget(n.Subtree)
		}
		s.WaitLoadersForTest()
		if h := s.HeldForTest(); h.Loaded < 20 {
			t.Fatalf("%T: after the walk gave up d0 to d4, the loaders stopped with %+v held; want d5's trees up to the bound", l, h)
		}
		took := takeAll(t, s, top.Nodes[5].Subtree, false, func(int) {})
		s.WaitLoadersForTest()
		s.Stop()
		if h := s.HeldForTest(); h.Loaded != 0 || h.Nodes != 0 || h.Bytes != 0 || h.Flying != 0 || h.Loads != 0 {
			t.Errorf("%T: after the walk, %+v still counted", l, h)
		}
		if took != 1+6+36 {
			t.Errorf("%T: took %d trees under d5, want 43", l, took)
		}
	}
}

// countingLoader counts the loads of each blob; when block is set, it
// holds the load of block until release is closed, and closes started
// when that load begins.
type countingLoader struct {
	l                snapshot.BlobLoader
	block            blob.ID
	started, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	loads            map[blob.ID]int
}

func (b *countingLoader) LoadBlob(ctx context.Context, t blob.Tier, typ blob.Type, id blob.ID, buf []byte) ([]byte, error) {
	b.mu.Lock()
	b.loads[id]++
	b.mu.Unlock()
	if b.block != (blob.ID{}) && id == b.block {
		b.once.Do(func() { close(b.started) })
		<-b.release
	}
	return b.l.LoadBlob(ctx, t, typ, id, buf)
}

// TestTreesAheadForgetWhileLoading: a tree the walk gives up while a
// loader loads it is dropped when it comes: it does not count against
// the bounds and its subdirectories are not loaded.
func TestTreesAheadForgetWhileLoading(t *testing.T) {
	t.Parallel()
	r, root, dirs := flushedWideTree(t)
	top, err := snapshot.LoadTree(t.Context(), r, blob.Workspace, root.Subtree[0])
	if err != nil {
		t.Fatal(err)
	}
	d0 := top.Nodes[0].Subtree[0]
	l := &countingLoader{l: r.Repository, block: d0, started: make(chan struct{}), release: make(chan struct{}), loads: map[blob.ID]int{}}
	s := snapshot.NewTreesAhead(t.Context(), l, blob.Workspace, snapshot.DefaultAheadBounds, nil)
	defer s.Stop()
	s.QueueForTest(top) // d0 on top: the first loader takes it
	<-l.started
	s.Forget([]blob.ID{d0})
	close(l.release)
	s.WaitLoadersForTest()
	// everything but the top and d0's 43 trees
	if h := s.HeldForTest(); h.Loaded != dirs-1-43 || h.Flying != 0 {
		t.Errorf("held %+v, want the %d trees of d1 to d5", h, dirs-1-43)
	}
	d0t, err := snapshot.LoadTree(t.Context(), r, blob.Workspace, d0)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range d0t.Nodes {
		if l.loads[n.Subtree[0]] != 0 {
			t.Errorf("d0/%s loaded after d0 was given up", n.Name)
		}
	}
}

// walkPaths returns every path Walk visits from l, returning SkipDir for
// the directories skip names.
func walkPaths(t *testing.T, l snapshot.BlobLoader, root snapshot.Node, skip func(p string) bool) []string {
	t.Helper()
	var got []string
	err := snapshot.Walk(t.Context(), l, root.Subtree, "", func(p string, n *snapshot.Node) error {
		got = append(got, p)
		if n.Type == snapshot.TypeDir && skip(p) {
			return snapshot.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// loadDirPaths is walkPaths by LoadDir, a tree at a time, nothing ahead.
func loadDirPaths(t *testing.T, l snapshot.BlobLoader, root snapshot.Node, skip func(p string) bool) []string {
	t.Helper()
	var got []string
	var walk func(subtree []blob.ID, prefix string) error
	walk = func(subtree []blob.ID, prefix string) error {
		return snapshot.LoadDir(t.Context(), l, blob.Workspace, subtree, func(n *snapshot.Node) error {
			p := path.Join(prefix, string(n.Name))
			got = append(got, p)
			if n.Type != snapshot.TypeDir || skip(p) {
				return nil
			}
			return walk(n.Subtree, p)
		})
	}
	if err := walk(root.Subtree, ""); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWalkReadsTreesTogether: Walk, as `lifeboat ls` and a recovery
// offer run it, reads a repository's trees a batch at a time, not a read
// each (a request each on S3), and visits what a walk one tree at a time
// visits, in the same order, also when it skips directories.
func TestWalkReadsTreesTogether(t *testing.T) {
	t.Parallel()
	r, root, dirs := flushedWideTree(t)
	r2, reads := r.Reopen(t)
	all := func(string) bool { return false }
	got := walkPaths(t, r2, root, all)
	if loads := reads.Count(); loads*4 > dirs {
		t.Errorf("%d reads for %d tree blobs, want at most one for 4", loads, dirs)
	} else {
		t.Logf("%d tree blobs, %d reads", dirs, loads)
	}
	want := loadDirPaths(t, r.Repository, root, all)
	if len(want) != dirs-1+6*6*6 || !slices.Equal(got, want) {
		t.Fatalf("walked %d paths, one at a time %d (want %d)", len(got), len(want), dirs-1+6*6*6)
	}
	// Skipping every directory but d1 and d1/d2 (as `ls PATH` does):
	// nothing under the others is visited.
	onPath := func(p string) bool { return p != "d1" && !strings.HasPrefix(p, "d1/d2") }
	got = walkPaths(t, r2, root, onPath)
	want = loadDirPaths(t, r.Repository, root, onPath)
	if !slices.Equal(got, want) || !slices.Contains(got, "d1/d2/d3/f-1-2-3") || slices.Contains(got, "d0/d0") || slices.Contains(got, "d1/d3/d0") {
		t.Fatalf("skipping directories, walked %q; one at a time %q", got, want)
	}
}

// countMarker is a repo.Marker that records what it was told. Like
// prune's, it is not safe for concurrent use: Reach serialises its calls.
type countMarker struct {
	trees map[blob.ID]bool
	adds  map[blob.ID]int
}

func (m *countMarker) Seen(_ blob.Tier, id blob.ID) (bool, error) { return m.trees[id], nil }

func (m *countMarker) Add(_ blob.Tier, typ blob.Type, id blob.ID) error {
	m.adds[id]++
	if typ == blob.Tree {
		m.trees[id] = true
	}
	return nil
}

// TestReachReadsTreesTogether: prune's walk of what a snapshot reaches
// reads the trees a batch at a time and marks each tree once and every
// chunk of every file; a second snapshot sharing every tree but its root
// reads no tree it has seen.
func TestReachReadsTreesTogether(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	wide, dirs := r.WideTree(t)
	data := make([]byte, 4<<20) // a fixed pattern the chunker cuts
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	file := r.File(t, "data", data)
	m1 := r.Manifest(t, r.Dir(t, "root", wide, file), true)
	m2 := r.Manifest(t, r.Dir(t, "root", wide, r.File(t, "new", []byte("new file"))), true)
	r2, reads := r.Reopen(t)
	mk := &countMarker{trees: map[blob.ID]bool{}, adds: map[blob.ID]int{}}
	if err := snapshot.Reach(t.Context(), r2, m1.ID, mk); err != nil {
		t.Fatal(err)
	}
	// the root of m1 and every directory of wide (its own root included)
	if len(mk.trees) != dirs+1 {
		t.Fatalf("marked %d trees, want %d", len(mk.trees), dirs+1)
	}
	for id, n := range mk.adds {
		if mk.trees[id] && n != 1 {
			t.Errorf("tree %s marked %d times", id.Short(), n)
		}
	}
	if len(file.Content) < 2 {
		t.Fatalf("the file has %d chunks, want several", len(file.Content))
	}
	for _, c := range file.Content {
		if mk.adds[c] == 0 {
			t.Errorf("chunk %s of the file not marked", c.Short())
		}
	}
	first := reads.Count()
	if first*4 > dirs {
		t.Errorf("%d reads for %d tree blobs, want at most one for 4", first, dirs)
	}
	if err := snapshot.Reach(t.Context(), r2, m2.ID, mk); err != nil {
		t.Fatal(err)
	}
	if len(mk.trees) != dirs+2 {
		t.Fatalf("marked %d trees after the second snapshot, want %d", len(mk.trees), dirs+2)
	}
	if second := reads.Count() - first; second > 1 {
		t.Errorf("the second snapshot read packs %d times for its one new tree", second)
	}
	t.Logf("%d tree blobs: %d reads, then %d", dirs+2, first, reads.Count()-first)
}

// TestTreesAheadWant: the trees want leaves out (those prune has walked
// for another snapshot) are not loaded ahead, nor anything below them.
func TestTreesAheadWant(t *testing.T) {
	t.Parallel()
	blobs := snaptest.Blobs{}
	l := &countingLoader{l: blobs, loads: map[blob.ID]int{}}
	save := func(nodes []snapshot.Node) blob.ID {
		b := mustEncode(t, nodes)
		var id blob.ID
		id[0], id[1] = 2, byte(len(blobs))
		blobs[id] = b
		return id
	}
	leaf := func(name string) snapshot.Node {
		return snapshot.Node{Name: []byte(name), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{save(nil)}}
	}
	var top []snapshot.Node
	unwanted := map[blob.ID]bool{}
	for i := range 8 {
		n := snapshot.Node{Name: fmt.Appendf(nil, "d%d", i), Type: snapshot.TypeDir, Mode: 0o755,
			Subtree: []blob.ID{save([]snapshot.Node{leaf("a"), leaf("b")})}}
		if i%2 == 1 {
			unwanted[n.Subtree[0]] = true
		}
		top = append(top, n)
	}
	root := mustDecode(t, mustEncode(t, top))
	s := snapshot.NewTreesAhead(t.Context(), l, blob.Workspace, snapshot.DefaultAheadBounds, func(id blob.ID) bool { return !unwanted[id] })
	defer s.Stop()
	s.QueueForTest(root)
	s.WaitLoadersForTest()
	// d0, d2, d4, d6 and their two subdirectories each
	if h := s.HeldForTest(); h.Loaded != 4*3 {
		t.Errorf("held %+v, want the 12 trees wanted loaded", h)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range unwanted {
		if l.loads[id] != 0 {
			t.Errorf("tree %x not wanted, loaded %d times", id[:2], l.loads[id])
		}
	}
	if len(l.loads) != 12 {
		t.Errorf("loaded %d trees, want 12", len(l.loads))
	}
}

// TestTreesAheadLoadDirFails: a directory whose first tree blob is missing
// fails LoadDir, and what was loaded ahead for the rest of it is given up,
// so it holds nothing against the bounds for the rest of the walk (check
// goes on after such a directory).
func TestTreesAheadLoadDirFails(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	wide, dirs := r.WideTree(t)
	var ghost blob.ID
	ghost[0] = 0xee
	odd := snapshot.Node{Name: []byte("odd"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{ghost, wide.Subtree[0]}}
	parent := mustDecode(t, mustEncode(t, []snapshot.Node{odd}))
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := snapshot.NewTreesAhead(t.Context(), r.Repository, blob.Workspace, snapshot.AheadBounds{Trees: 20, Nodes: 1 << 16, Bytes: 64 << 20}, nil)
	defer s.Stop()
	s.QueueForTest(parent)
	s.WaitLoadersForTest()
	if h := s.HeldForTest(); h.Loaded < 20 {
		t.Fatalf("held %+v before the walk; want the bound of 20 trees of %d", h, dirs)
	}
	err := s.LoadDir(t.Context(), odd.Subtree, func(*snapshot.Node) error { return nil })
	if !errors.Is(err, repo.ErrBlobNotFound) {
		t.Fatalf("LoadDir of a directory whose first blob is missing: %v", err)
	}
	s.WaitLoadersForTest()
	if h := s.HeldForTest(); h.Loaded != 0 || h.Nodes != 0 || h.Bytes != 0 {
		t.Errorf("after LoadDir failed, %+v still held", h)
	}

	// A walk that stops at the second entry of a directory (its first it
	// skips): what was loaded below the entries it did not reach is given
	// up too.
	s2 := snapshot.NewTreesAhead(t.Context(), r.Repository, blob.Workspace, snapshot.AheadBounds{Trees: 20, Nodes: 1 << 16, Bytes: 64 << 20}, nil)
	defer s2.Stop()
	stop := errors.New("stop")
	err = s2.LoadDir(t.Context(), wide.Subtree, func(n *snapshot.Node) error {
		if string(n.Name) == "d0" {
			s2.Forget(n.Subtree)
			return nil
		}
		s2.WaitLoadersForTest() // what is below d1 to d5 is loaded ahead
		if h := s2.HeldForTest(); h.Loaded < 20 {
			t.Errorf("held %+v when the walk stops; want the bound of 20 trees", h)
		}
		return stop
	})
	if err != stop {
		t.Fatalf("LoadDir: %v", err)
	}
	s2.WaitLoadersForTest()
	if h := s2.HeldForTest(); h.Loaded != 0 || h.Nodes != 0 || h.Bytes != 0 {
		t.Errorf("after the walk stopped in a directory, %+v still held", h)
	}
}

// TestTreesAheadStackBounded: while the loaders wait for room (here: the
// tree they loaded is the one the walk, going backwards, takes last), the
// trees the walk loads itself leave their ids on the stack; the stack
// drops those taken as it grows, so it stays within a few times what is
// queued, and the walk still takes every tree.
func TestTreesAheadStackBounded(t *testing.T) {
	t.Parallel()
	r, wide, dirs := flushedWideTree(t)
	s := snapshot.NewTreesAhead(t.Context(), oneAtATime{r.Repository}, blob.Workspace, snapshot.AheadBounds{Trees: 1, Nodes: 1 << 16, Bytes: 64 << 20}, nil)
	defer s.Stop()
	most := 0
	took := takeAll(t, s, wide.Subtree, true, func(took int) {
		h := s.HeldForTest()
		most = max(most, h.Stack)
		if h.Stack > 2*h.Loads+64+6 {
			t.Fatalf("after %d trees: %d ids on the stack for %d loads", took, h.Stack, h.Loads)
		}
	})
	if took != dirs {
		t.Errorf("took %d trees, want %d", took, dirs)
	}
	t.Logf("at most %d ids on the stack, walking %d trees", most, dirs)
}
