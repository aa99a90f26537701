package restore

import (
	"context"
	"runtime"
	"slices"
	"sync"

	"lifeboat/blob"

	"lifeboat/snapshot"
)

// rsTrees loads and decodes the tree blobs the planner walks, ahead of the
// walk, on GOMAXPROCS goroutines. The walk is depth first and needs one
// listing at a time; loading each (a pack read, decryption, decompression,
// the id check, decoding) on the walk's own goroutine kept one core busy
// and the other idle for the first half second of a restore of the bench
// corpus (6,400 directories).
//
// Each tree loaded (by a loader or by the walk) has its subdirectories'
// trees queued, on a stack, so that they are loaded in about the order the
// depth-first walk takes them. They are queued before the walk can reach
// them, so every tree loaded ahead is taken. Loaders stop while
// rsTreesAhead trees, trees holding rsNodesAhead entries, or rsBytesAhead
// bytes of tree blobs are loaded and not yet taken, so what waits for the
// walk stays bounded however large the snapshot (or a forged one: a tree
// of one entry can carry megabytes of extended attributes); the queue
// holds an id per subdirectory of the trees loaded, whose entries the plan
// keeps anyway. The bounds are checked before a load, so each loader
// running may pass them by one tree. A tree the walk wants that no loader
// has started is loaded by the walk itself, and a tree listed twice
// (identical directories share a blob) may be loaded again for its second
// use, as the walk alone would.
//
// Known limit: the stack is last in, first out, so while the walk loads a
// tree itself, the loaders may fill the bounds with the subtrees of a
// later sibling; the walk then loads the trees before that sibling itself,
// as it did before there were loaders, until it reaches it. Never slower
// than a walk alone, but the look-ahead is lost for that stretch.
type rsTrees struct {
	ctx    context.Context
	cancel context.CancelFunc
	l      snapshot.BlobLoader
	tier   blob.Tier

	mu      sync.Mutex
	loads   map[blob.ID]*rsTreeLoad // queued, loading or loaded; not yet taken
	stack   []blob.ID               // queued, the next to load last
	loaded  int                     // trees loaded and not taken
	nodes   int                     // their entries
	bytes   int                     // their blobs' sizes
	workers int                     // loaders running
	wg      sync.WaitGroup
}

// rsTreeLoad is one tree loaded ahead.
type rsTreeLoad struct {
	done   chan struct{} // closed once t and err are set
	t      *snapshot.Tree
	size   int // the blob's size
	err    error
	queued bool // not started yet
}

// The bounds on what is loaded ahead and not yet taken: trees, their
// entries, and the bytes of their blobs.
var ( // variables for tests
	rsTreesAhead = 4096
	rsNodesAhead = 1 << 16
	rsBytesAhead = 64 << 20
)

// rsBadTree is a tree blob that loaded but did not decode.
type rsBadTree struct{ err error }

func (e *rsBadTree) Error() string { return e.err.Error() }

func newRsTrees(ctx context.Context, l snapshot.BlobLoader, tier blob.Tier) *rsTrees {
	ctx, cancel := context.WithCancel(ctx)
	return &rsTrees{ctx: ctx, cancel: cancel, l: l, tier: tier, loads: map[blob.ID]*rsTreeLoad{}}
}

// stop ends the loading ahead and waits for the loaders.
func (s *rsTrees) stop() {
	s.cancel()
	s.wg.Wait()
}

// load returns tree id decoded: the one loaded ahead, or loaded now. A
// decoding error is an *rsBadTree.
func (s *rsTrees) load(ctx context.Context, id blob.ID) (*snapshot.Tree, error) {
	s.mu.Lock()
	tl := s.loads[id]
	delete(s.loads, id)
	if tl != nil && tl.queued { // not started: the walk loads it itself
		tl.queued = false
		tl = nil
	}
	s.mu.Unlock()
	if tl == nil {
		t, _, err := rsLoadTree(ctx, s.l, s.tier, id)
		if err == nil {
			s.mu.Lock()
			s.queue(t)
			s.mu.Unlock()
		}
		return t, err
	}
	select {
	case <-tl.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if tl.err == nil {
		s.mu.Lock()
		s.loaded--
		s.nodes -= len(tl.t.Nodes)
		s.bytes -= tl.size
		s.start()
		s.mu.Unlock()
	}
	return tl.t, tl.err
}

// queue queues the trees of t's subdirectories, the first on top, and
// starts loaders. s.mu is held.
func (s *rsTrees) queue(t *snapshot.Tree) {
	n := len(s.stack)
	for i := range t.Nodes {
		if t.Nodes[i].Type != snapshot.TypeDir {
			continue
		}
		for _, id := range t.Nodes[i].Subtree {
			if s.loads[id] == nil {
				s.loads[id] = &rsTreeLoad{done: make(chan struct{}), queued: true}
				s.stack = append(s.stack, id)
			}
		}
	}
	slices.Reverse(s.stack[n:])
	s.start()
}

// room reports whether the bounds allow loading another tree. s.mu is
// held.
func (s *rsTrees) room() bool {
	return s.loaded < rsTreesAhead && s.nodes < rsNodesAhead && s.bytes < rsBytesAhead && s.ctx.Err() == nil
}

// start starts loaders while there is work and room for it, no more than
// there are trees queued. s.mu is held.
func (s *rsTrees) start() {
	for s.workers < min(runtime.GOMAXPROCS(0), len(s.stack)) && s.room() {
		s.workers++
		s.wg.Add(1)
		go s.work()
	}
}

// work loads queued trees while there are some and room for them.
func (s *rsTrees) work() {
	defer s.wg.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.stack) > 0 && s.room() {
		id := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		tl := s.loads[id]
		if tl == nil || !tl.queued { // taken by the walk, or queued twice
			continue
		}
		tl.queued = false
		s.mu.Unlock()
		tl.t, tl.size, tl.err = rsLoadTree(s.ctx, s.l, s.tier, id)
		s.mu.Lock()
		if tl.err == nil {
			s.loaded++
			s.nodes += len(tl.t.Nodes)
			s.bytes += tl.size
			s.queue(tl.t)
		}
		close(tl.done)
	}
	s.workers--
}

// rsLoadTree loads and decodes one tree blob, and returns the blob's size
// with it; a decoding error is an *rsBadTree.
func rsLoadTree(ctx context.Context, l snapshot.BlobLoader, tier blob.Tier, id blob.ID) (*snapshot.Tree, int, error) {
	b, err := l.LoadBlob(ctx, tier, blob.Tree, id, nil)
	if err != nil {
		return nil, 0, err
	}
	t, err := snapshot.DecodeTree(b)
	if err != nil {
		return nil, 0, &rsBadTree{err}
	}
	return t, len(b), nil
}
