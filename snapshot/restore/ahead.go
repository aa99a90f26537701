package restore

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"

	"lifeboat/blob"
	"lifeboat/repo"
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
// depth-first walk takes them. From a repository they are taken a batch
// at a time, looked up together and read pack by pack (fetch). They are
// queued before the walk can reach them, so every tree loaded ahead is
// taken. Loaders stop while rsTreesAhead trees, trees holding rsNodesAhead
// entries, or rsBytesAhead bytes of tree blobs are loaded and not yet
// taken, so what waits for the walk stays bounded however large the
// snapshot (or a forged one: a tree of one entry can carry megabytes of
// extended attributes); the queue holds an id per subdirectory of the
// trees loaded, whose entries the plan keeps anyway. The bounds are
// checked before a load, so each loader running may pass them by one tree
// (a batch keeps to the bytes bound, counting the trees being loaded). A
// tree the walk wants that no loader has started is loaded by the walk
// itself, with a batch, and a tree listed twice (identical directories
// share a blob) may be loaded again for its second use, as the walk alone
// would.
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
	flying  rsFlight                // trees being loaded in batches
	workers int                     // loaders running
	wg      sync.WaitGroup
}

// rsTreeLoad is one tree loaded ahead.
type rsTreeLoad struct {
	id     blob.ID
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
	if tl == nil || tl.queued {
		// Not started: the walk loads it itself, from a source that
		// reads many trees at once with a batch of the trees queued last
		// if there is room for them.
		own := &rsTreeLoad{id: id}
		if tl != nil {
			tl.queued = false
		}
		batch := []*rsTreeLoad{own}
		if _, ok := s.l.(rsTreeSource); ok && s.room() {
			batch = append(batch, s.take()...)
		}
		s.mu.Unlock()
		batch, flight := s.fetch(batch, true)
		s.mu.Lock()
		s.deliver(batch[1:], flight)
		if own.err == nil {
			s.queue(own.t)
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
				s.loads[id] = &rsTreeLoad{id: id, done: make(chan struct{}), queued: true}
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
	return s.loaded+s.flying.trees < rsTreesAhead && s.nodes < rsNodesAhead && s.bytes+s.flying.bytes < rsBytesAhead && s.ctx.Err() == nil
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

// work loads queued trees while there are some and room for them, a batch
// at a time (take).
func (s *rsTrees) work() {
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
// wakes whoever waits for them. s.mu is held.
func (s *rsTrees) deliver(batch []*rsTreeLoad, flight rsFlight) {
	s.flying.trees -= flight.trees
	s.flying.bytes -= flight.bytes
	for i := len(batch) - 1; i >= 0; i-- {
		tl := batch[i]
		if tl.err == nil {
			s.loaded++
			s.nodes += len(tl.t.Nodes)
			s.bytes += tl.size
			s.queue(tl.t)
		}
		close(tl.done)
	}
}

// rsTreeSource reads many tree blobs at once: their places in one index
// lookup, then each pack's blobs in as few reads as the gaps between them
// allow. A repository is one.
type rsTreeSource interface {
	rsLocator
	StreamPack(ctx context.Context, t blob.Tier, id blob.ID, es []repo.PackEntry, o repo.StreamOptions, fn func(i int, sealed, plain []byte) error) error
}

// Batches of trees loaded ahead from an rsTreeSource. A directory's
// subdirectories are queued together and their trees lie near each other
// in the pack the capture wrote them into, so a batch of the trees queued
// last costs a read or two where a read each took a request each: on S3
// (versitygw on the same host) planning the restore of the bench's
// binaries corpus (2,655 directories) took 3.2-3.9 s of the restore's
// 5.1-9.3 s, and takes 0.16-0.23 s of 2.1-3.6 s so. Unwanted bytes up to
// rsTreesGap between two wanted trees are read through; one read holds at
// most rsTreesMaxRead bytes.
const (
	rsTreesBatch   = 256
	rsTreesGap     = 256 << 10
	rsTreesMaxRead = 4 << 20
)

// take takes the trees queued last, a batch of them from a source that
// reads many at once (at most rsTreesBatch, and at most room for them
// under the trees bound with those being loaded; the queue's share of each
// loader, or up to 16 of a short queue), else one. s.mu is held.
func (s *rsTrees) take() []*rsTreeLoad {
	n := 1
	if _, ok := s.l.(rsTreeSource); ok {
		share := max(min(len(s.stack), 16), len(s.stack)/max(1, s.workers))
		n = min(rsTreesBatch, share, max(1, rsTreesAhead-s.loaded-s.flying.trees))
	}
	var batch []*rsTreeLoad
	for len(batch) < n && len(s.stack) > 0 {
		id := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		tl := s.loads[id]
		if tl == nil || !tl.queued { // taken by the walk, or queued twice
			continue
		}
		tl.queued = false
		batch = append(batch, tl)
	}
	return batch
}

// rsFlight counts the trees being loaded in batches and their blobs'
// plaintext bytes.
type rsFlight struct{ trees, bytes int }

// fetch loads the trees of batch, taken by a loader or by the walk (its
// own tree first), and returns those it loaded (set t and size, or err)
// and what it counted in s.flying for them, for the caller to take back.
// It uses s.ctx: the plan's context, which stop also cancels.
//
// With an rsTreeSource it looks them up first and keeps, in order, the
// first tree, any tree the walk waits for, and those found whose blobs fit
// the bytes bound with the trees loaded and being loaded; for the walk,
// only those in its own tree's pack, so that it waits for one read. It
// queues the others again, and reads each pack's trees together. A tree
// that does not come that way (not indexed, or in a read that failed or
// a blob that did not verify) is loaded alone, as the walk would, for the
// same error.
func (s *rsTrees) fetch(batch []*rsTreeLoad, walk bool) ([]*rsTreeLoad, rsFlight) {
	src, ok := s.l.(rsTreeSource)
	if !ok || len(batch) == 1 {
		for _, tl := range batch {
			tl.t, tl.size, tl.err = rsLoadTree(s.ctx, s.l, s.tier, tl.id)
		}
		return batch, rsFlight{}
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
	byPack := map[blob.ID][]int{}
	for i := range batch {
		if found[i] {
			byPack[locs[i].Pack] = append(byPack[locs[i].Pack], i)
		}
	}
	loaded := make([]bool, len(batch))
	for pk, in := range byPack {
		slices.SortFunc(in, func(a, b int) int { return cmp.Compare(locs[a].Offset, locs[b].Offset) })
		es := make([]repo.PackEntry, len(in))
		for j, i := range in {
			es[j] = locs[i].Entry
		}
		// A failed read, or a blob that does not verify, leaves its
		// trees to be loaded alone; the stream goes on after them.
		for from := 0; from < len(es) && s.ctx.Err() == nil; {
			err := src.StreamPack(s.ctx, s.tier, pk, es[from:], repo.StreamOptions{Gap: rsTreesGap, MaxRead: rsTreesMaxRead}, func(j int, _, plain []byte) error {
				// The tree never shares the plaintext's bytes
				// (DecodeTree), which the stream recycles.
				tl := batch[in[from+j]]
				if t, err := snapshot.DecodeTree(plain); err != nil {
					tl.err = &rsBadTree{err}
				} else {
					tl.t, tl.size = t, len(plain)
				}
				loaded[in[from+j]] = true
				return nil
			})
			se := (*repo.StreamError)(nil)
			if !errors.As(err, &se) {
				break
			}
			from += se.Index + se.Count
		}
	}
	for i, tl := range batch {
		switch {
		case loaded[i]:
		case s.ctx.Err() != nil:
			tl.err = s.ctx.Err()
		default:
			tl.t, tl.size, tl.err = rsLoadTree(s.ctx, s.l, s.tier, tl.id)
		}
	}
	return batch, flight
}

// fit keeps the trees of batch fetch keeps (see there), in order, and
// counts them as being loaded; it queues the others again, on top. It
// returns the kept trees with their places and what it counted.
func (s *rsTrees) fit(batch []*rsTreeLoad, locs []repo.Location, found []bool, walk bool) ([]*rsTreeLoad, []repo.Location, []bool, rsFlight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	budget, kept := rsBytesAhead-s.bytes-s.flying.bytes, 0
	var flight rsFlight
	var back []*rsTreeLoad
	for i, tl := range batch {
		n := int(locs[i].PlainLen)
		fits := found[i] && flight.bytes+n <= budget && (!walk || found[0] && locs[i].Pack == locs[0].Pack)
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
