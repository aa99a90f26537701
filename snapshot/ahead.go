package snapshot

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"lifeboat/blob"
	"lifeboat/repo"
)

// TreesAhead loads and decodes the tree blobs a depth-first walk of a
// snapshot takes, ahead of the walk, on GOMAXPROCS goroutines: a restore's
// plan, `lifeboat ls`, a recovery offer's description and prune's walk of
// what each snapshot reaches. The walk needs one listing at a time; loading
// each (a pack read, decryption, decompression, the id check, decoding) on
// the walk's own goroutine kept one core busy and the other idle for the
// first half second of a restore of the bench corpus (6,400 directories),
// and costs a request per directory on S3.
//
// Each tree loaded (by a loader or by the walk) has its subdirectories'
// trees queued, on a stack, so that they are loaded in about the order the
// depth-first walk takes them; want, when set, and the walk's keep
// (LoadKeep) leave out those the walk will not take. From a TreeSource (a repository) they are taken a batch
// at a time, looked up together and read pack by pack (fetch). They are
// queued before the walk can reach them, so every tree loaded ahead is
// taken, unless the walk gives it up (Forget). Loaders stop while the
// bounds' trees, trees holding their entries, or their bytes of tree blobs
// are loaded and not yet taken, so what waits for the walk stays bounded
// however large the snapshot (or a forged one: a tree of one entry can
// carry megabytes of extended attributes); the queue holds an id per
// subdirectory of the trees loaded and not yet taken (ids taken or
// forgotten meanwhile are cleared from it as it grows). The bounds are checked before a load,
// so each loader running may pass them by one tree (a batch keeps to the
// bytes bound, counting the trees being loaded). A tree the walk wants
// that no loader has started is loaded by the walk itself, with a batch,
// and a tree listed twice (identical directories share a blob) may be
// loaded again for its second use, as the walk alone would.
//
// Known limit: the stack is last in, first out, so while the walk loads a
// tree itself, the loaders may fill the bounds with the subtrees of a
// later sibling; the walk then loads the trees before that sibling itself,
// as it did before there were loaders, until it reaches it. Never slower
// than a walk alone, but the look-ahead is lost for that stretch.
type TreesAhead struct {
	ctx    context.Context
	cancel context.CancelFunc
	l      BlobLoader
	tier   blob.Tier
	bounds AheadBounds
	want   func(blob.ID) bool

	mu      sync.Mutex
	loads   map[blob.ID]*aheadLoad // queued, loading or loaded; not yet taken
	stack   []blob.ID              // queued, the next to load last
	loaded  int                    // trees loaded and not taken
	nodes   int                    // their entries
	bytes   int                    // their blobs' sizes
	flying  aheadFlight            // trees being loaded in batches
	workers int                    // loaders running
	wg      sync.WaitGroup
}

// AheadBounds bound what a TreesAhead holds loaded and not yet taken:
// trees, their entries, and the bytes of their blobs.
type AheadBounds struct{ Trees, Nodes, Bytes int }

// DefaultAheadBounds hold at most 64 MiB of tree blobs ahead of a walk:
// a restore's plan.
var DefaultAheadBounds = AheadBounds{Trees: 4096, Nodes: 1 << 16, Bytes: 64 << 20}

// WalkAheadBounds, a quarter of DefaultAheadBounds, are for walks that
// may run several at once: prune's four, a server's descriptions of
// checkpoints it offers, ls and check. A batch is at most 256 trees, so
// each still reads a few batches ahead.
var WalkAheadBounds = AheadBounds{Trees: DefaultAheadBounds.Trees / 4, Nodes: DefaultAheadBounds.Nodes / 4, Bytes: DefaultAheadBounds.Bytes / 4}

// aheadLoad is one tree loaded ahead.
type aheadLoad struct {
	id      blob.ID
	done    chan struct{} // closed once t and err are set
	t       *Tree
	size    int // the blob's size
	err     error
	queued  bool // not started yet
	counted bool // loaded, and counted against the bounds
	dropped bool // given up while being loaded (Forget)
}

// BadTreeError is a tree blob that loaded but did not decode.
type BadTreeError struct{ Err error }

func (e *BadTreeError) Error() string { return e.Err.Error() }
func (e *BadTreeError) Unwrap() error { return e.Err }

// NewTreesAhead starts loading ahead from l, trees of tier, within bounds;
// want, when not nil, says which subdirectories' trees the walk will take
// (it is called with the TreesAhead's lock held, from any goroutine). The
// caller must Stop it.
func NewTreesAhead(ctx context.Context, l BlobLoader, tier blob.Tier, bounds AheadBounds, want func(blob.ID) bool) *TreesAhead {
	ctx, cancel := context.WithCancel(ctx)
	return &TreesAhead{ctx: ctx, cancel: cancel, l: l, tier: tier, bounds: bounds, want: want, loads: map[blob.ID]*aheadLoad{}}
}

// Stop ends the loading ahead and waits for the loaders.
func (s *TreesAhead) Stop() {
	s.cancel()
	s.wg.Wait()
}

// Load returns tree id decoded: the one loaded ahead, or loaded now. A
// decoding error is a *BadTreeError.
func (s *TreesAhead) Load(ctx context.Context, id blob.ID) (*Tree, error) {
	return s.LoadKeep(ctx, id, nil)
}

// LoadKeep is Load for a walk that will enter only the subdirectories of
// the tree that keep, when not nil, keeps: the others are never queued
// when the walk loads the tree itself, and are forgotten when it was
// loaded ahead (their trees may have been loaded by then).
func (s *TreesAhead) LoadKeep(ctx context.Context, id blob.ID, keep func(*Node) bool) (*Tree, error) {
	s.mu.Lock()
	tl := s.loads[id]
	delete(s.loads, id)
	if tl == nil || tl.queued {
		// Not started: the walk loads it itself, from a source that
		// reads many trees at once with a batch of the trees queued last
		// if there is room for them.
		own := &aheadLoad{id: id}
		if tl != nil {
			tl.queued = false
		}
		batch := []*aheadLoad{own}
		if _, ok := s.l.(TreeSource); ok && s.room() {
			batch = append(batch, s.take()...)
		}
		s.mu.Unlock()
		batch, flight := s.fetch(batch, true)
		s.mu.Lock()
		s.deliver(batch[1:], flight)
		if own.err == nil {
			s.queue(own.t, keep)
		}
		s.mu.Unlock()
		return own.t, own.err
	}
	s.mu.Unlock()
	select {
	case <-tl.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	s.uncount(tl)
	if tl.err == nil && keep != nil {
		s.forgetDirs(tl.t.Nodes, keep)
	}
	s.mu.Unlock()
	return tl.t, tl.err
}

// LoadDir is the package's LoadDir, with the trees taken from s. When it
// fails, what the walk will not take from this directory (its blobs not
// loaded yet, the subdirectories of the entries not visited) is forgotten.
func (s *TreesAhead) LoadDir(ctx context.Context, subtree []blob.ID, fn func(*Node) error) error {
	var cur *Tree
	blobs, at := 0, 0 // blobs taken; entries of cur visited
	err := EachNode(subtree, func(id blob.ID) (*Tree, error) {
		blobs++
		t, err := s.Load(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("tree %s: %w", id.Short(), err)
		}
		cur, at = t, 0
		return t, nil
	}, func(n *Node) error {
		at++
		return fn(n)
	})
	if err != nil {
		s.mu.Lock()
		for _, id := range subtree[blobs:] {
			s.forget(id)
		}
		if cur != nil {
			s.forgetDirs(cur.Nodes[max(0, at-1):], nil)
		}
		s.mu.Unlock()
	}
	return err
}

// Forget tells s that the walk will not take the trees of subtree (it
// skips that directory, or has walked a tree of the same id already):
// those queued are not loaded, and those loaded, with what was queued for
// their subdirectories, no longer count against the bounds. A tree of the
// same id the walk still takes is loaded then.
func (s *TreesAhead) Forget(subtree []blob.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range subtree {
		s.forget(id)
	}
}

// forget is Forget of one tree. s.mu is held.
func (s *TreesAhead) forget(id blob.ID) {
	tl := s.loads[id]
	if tl == nil {
		return
	}
	delete(s.loads, id) // a queued one is left on the stack; take skips it
	tl.queued = false
	if !tl.counted { // being loaded: deliver drops it
		tl.dropped = true
		return
	}
	s.uncount(tl)
	s.forgetDirs(tl.t.Nodes, nil)
}

// forgetDirs forgets the trees of the directories among nodes that keep,
// when not nil, does not keep. s.mu is held.
func (s *TreesAhead) forgetDirs(nodes []Node, keep func(*Node) bool) {
	for i := range nodes {
		if n := &nodes[i]; n.Type == TypeDir && (keep == nil || !keep(n)) {
			for _, sub := range n.Subtree {
				s.forget(sub)
			}
		}
	}
}

// uncount takes tl, loaded, off the bounds and starts loaders the room
// freed allows. s.mu is held.
func (s *TreesAhead) uncount(tl *aheadLoad) {
	if !tl.counted {
		return
	}
	tl.counted = false
	s.loaded--
	s.nodes -= len(tl.t.Nodes)
	s.bytes -= tl.size
	s.start()
}

// queue queues the trees of t's subdirectories the walk will take (those
// keep keeps, when not nil, and want wants), the first on top, and starts
// loaders. s.mu is held.
func (s *TreesAhead) queue(t *Tree, keep func(*Node) bool) {
	if len(s.stack) > 2*len(s.loads)+64 {
		// Ids the walk took itself or forgot stay on the stack until a
		// loader pops them; while the loaders wait for room they would
		// pile up, an id per subdirectory walked.
		s.stack = slices.DeleteFunc(s.stack, func(id blob.ID) bool {
			tl := s.loads[id]
			return tl == nil || !tl.queued
		})
	}
	n := len(s.stack)
	for i := range t.Nodes {
		if t.Nodes[i].Type != TypeDir || keep != nil && !keep(&t.Nodes[i]) {
			continue
		}
		for _, id := range t.Nodes[i].Subtree {
			if s.loads[id] == nil && (s.want == nil || s.want(id)) {
				s.loads[id] = &aheadLoad{id: id, done: make(chan struct{}), queued: true}
				s.stack = append(s.stack, id)
			}
		}
	}
	slices.Reverse(s.stack[n:])
	s.start()
}

// room reports whether the bounds allow loading another tree. s.mu is
// held.
func (s *TreesAhead) room() bool {
	return s.loaded+s.flying.trees < s.bounds.Trees && s.nodes < s.bounds.Nodes && s.bytes+s.flying.bytes < s.bounds.Bytes && s.ctx.Err() == nil
}

// start starts loaders while there is work and room for it, no more than
// there are trees queued. s.mu is held.
func (s *TreesAhead) start() {
	for s.workers < min(runtime.GOMAXPROCS(0), len(s.stack)) && s.room() {
		s.workers++
		s.wg.Add(1)
		go s.work()
	}
}

// work loads queued trees while there are some and room for them, a batch
// at a time (take).
func (s *TreesAhead) work() {
	defer s.wg.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.stack) > 0 && s.room() {
		batch := s.take()
		if len(batch) == 0 {
			continue
		}
		s.mu.Unlock()
		batch, flight := s.fetch(batch, false)
		s.mu.Lock()
		s.deliver(batch, flight)
	}
	s.workers--
}

// deliver hands the trees of batch, loaded ahead, to the walk: it takes
// back what fetch counted as being loaded (flight), counts them against
// the bounds, queues their subdirectories (the first tree's on top) and
// wakes whoever waits for them; a tree given up while it was loaded is
// dropped. s.mu is held.
func (s *TreesAhead) deliver(batch []*aheadLoad, flight aheadFlight) {
	s.flying.trees -= flight.trees
	s.flying.bytes -= flight.bytes
	for i := len(batch) - 1; i >= 0; i-- {
		tl := batch[i]
		if tl.err == nil && !tl.dropped {
			tl.counted = true
			s.loaded++
			s.nodes += len(tl.t.Nodes)
			s.bytes += tl.size
			s.queue(tl.t, nil)
		}
		close(tl.done)
	}
}

// TreeSource reads many tree blobs at once: their places in one index
// lookup, then each pack's blobs in as few reads as the gaps between them
// allow. A repository is one.
type TreeSource interface {
	BlobLoader
	LookupBlobs(t blob.Tier, typ blob.Type, ids []blob.ID, fn func(i int, loc repo.Location, ok bool) error) error
	ReadPlaces(ctx context.Context, t blob.Tier, locs []repo.Location, o repo.StreamOptions, parallel int, fn func(i int, plain []byte))
}

// Batches of trees loaded ahead from a TreeSource. A directory's
// subdirectories are queued together and their trees lie near each other
// in the pack the capture wrote them into, so a batch of the trees queued
// last costs a read or two where a read each took a request each: on S3
// (versitygw on the same host) planning the restore of the bench's
// binaries corpus (2,655 directories) took 3.2-3.9 s of the restore's
// 5.1-9.3 s, and takes 0.16-0.23 s of 2.1-3.6 s so. Unwanted bytes up to
// aheadGap between two wanted trees are read through; one read holds at
// most aheadMaxRead bytes.
const (
	aheadBatch   = 256
	aheadGap     = 256 << 10
	aheadMaxRead = 4 << 20
)

// take takes the trees queued last, a batch of them from a source that
// reads many at once (at most aheadBatch, and at most room for them under
// the trees bound with those being loaded; the queue's share of each
// loader, or up to 16 of a short queue), else one. s.mu is held.
func (s *TreesAhead) take() []*aheadLoad {
	n := 1
	if _, ok := s.l.(TreeSource); ok {
		share := max(min(len(s.stack), 16), len(s.stack)/max(1, s.workers))
		n = min(aheadBatch, share, max(1, s.bounds.Trees-s.loaded-s.flying.trees))
	}
	var batch []*aheadLoad
	for len(batch) < n && len(s.stack) > 0 {
		id := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		tl := s.loads[id]
		if tl == nil || !tl.queued { // taken or given up by the walk, or queued twice
			continue
		}
		tl.queued = false
		batch = append(batch, tl)
	}
	return batch
}

// aheadFlight counts the trees being loaded in batches and their blobs'
// plaintext bytes.
type aheadFlight struct{ trees, bytes int }

// fetch loads the trees of batch, taken by a loader or by the walk (its
// own tree first), and returns those it loaded (set t and size, or err)
// and what it counted in s.flying for them, for the caller to take back.
// It uses s.ctx: the walk's context, which Stop also cancels.
//
// With a TreeSource it looks them up first and keeps, in order, the first
// tree, any tree the walk waits for, and those found whose blobs fit the
// bytes bound with the trees loaded and being loaded; for the walk, only
// those in its own tree's pack, so that it waits for one read. It queues
// the others again, and reads each pack's trees together. A tree that does
// not come that way (not indexed, or in a read that failed or a blob that
// did not verify) is loaded alone, as the walk would, for the same error.
func (s *TreesAhead) fetch(batch []*aheadLoad, walk bool) ([]*aheadLoad, aheadFlight) {
	src, ok := s.l.(TreeSource)
	if !ok || len(batch) == 1 {
		for _, tl := range batch {
			tl.t, tl.size, tl.err = loadTree(s.ctx, s.l, s.tier, tl.id)
		}
		return batch, aheadFlight{}
	}
	ids := make([]blob.ID, len(batch))
	for i, tl := range batch {
		ids[i] = tl.id
	}
	locs := make([]repo.Location, len(batch))
	found := make([]bool, len(batch))
	if err := src.LookupBlobs(s.tier, blob.Tree, ids, func(i int, loc repo.Location, ok bool) error {
		locs[i], found[i] = loc, ok && loc.ID == ids[i] && loc.Type == blob.Tree
		return nil
	}); err != nil {
		clear(found) // each is loaded alone, which reports the error
	}
	batch, locs, found, flight := s.fit(batch, locs, found, walk)
	var read []repo.Location // the places found
	var at []int             // their trees' indexes in batch
	for i := range batch {
		if found[i] {
			read, at = append(read, locs[i]), append(at, i)
		}
	}
	loaded := make([]bool, len(batch))
	src.ReadPlaces(s.ctx, s.tier, read, repo.StreamOptions{Gap: aheadGap, MaxRead: aheadMaxRead}, 1, func(k int, plain []byte) {
		// The tree never shares the plaintext's bytes (DecodeTree),
		// which the stream recycles.
		tl := batch[at[k]]
		if t, err := DecodeTree(plain); err != nil {
			tl.err = &BadTreeError{err}
		} else {
			tl.t, tl.size = t, len(plain)
		}
		loaded[at[k]] = true
	})
	for i, tl := range batch {
		switch {
		case loaded[i]:
		case s.ctx.Err() != nil:
			tl.err = s.ctx.Err()
		default:
			tl.t, tl.size, tl.err = loadTree(s.ctx, s.l, s.tier, tl.id)
		}
	}
	return batch, flight
}

// fit keeps the trees of batch fetch keeps (see there), in order, and
// counts them as being loaded; it queues the others again, on top, but for
// those given up meanwhile. It returns the kept trees with their places
// and what it counted.
func (s *TreesAhead) fit(batch []*aheadLoad, locs []repo.Location, found []bool, walk bool) ([]*aheadLoad, []repo.Location, []bool, aheadFlight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	budget, kept := s.bounds.Bytes-s.bytes-s.flying.bytes, 0
	var flight aheadFlight
	var back []*aheadLoad
	for i, tl := range batch {
		n := int(locs[i].PlainLen)
		fits := found[i] && flight.bytes+n <= budget && (!walk || found[0] && locs[i].Pack == locs[0].Pack)
		if tl.dropped { // never the walk's own
			close(tl.done)
			continue
		}
		if i > 0 && !fits && s.loads[tl.id] == tl { // no one waits for it
			back = append(back, tl)
			continue
		}
		if !found[i] {
			n = 0
		}
		batch[kept], locs[kept], found[kept] = tl, locs[i], found[i]
		kept++
		flight.trees++
		flight.bytes += n
	}
	for i := len(back) - 1; i >= 0; i-- {
		back[i].queued = true
		s.stack = append(s.stack, back[i].id)
	}
	s.flying.trees += flight.trees
	s.flying.bytes += flight.bytes
	return batch[:kept], locs[:kept], found[:kept], flight
}

// LoadTree loads and decodes one tree blob; a decoding error is a
// *BadTreeError.
func LoadTree(ctx context.Context, l BlobLoader, tier blob.Tier, id blob.ID) (*Tree, error) {
	t, _, err := loadTree(ctx, l, tier, id)
	return t, err
}

// loadTree is LoadTree that also returns the blob's size.
func loadTree(ctx context.Context, l BlobLoader, tier blob.Tier, id blob.ID) (*Tree, int, error) {
	b, err := l.LoadBlob(ctx, tier, blob.Tree, id, nil)
	if err != nil {
		return nil, 0, err
	}
	t, err := DecodeTree(b)
	if err != nil {
		return nil, 0, &BadTreeError{err}
	}
	return t, len(b), nil
}
