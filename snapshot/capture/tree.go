package capture

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"

	"lifeboat/snapshot"
)

// A directory's entries are captured in parts of MaxNodesPerBlob entries,
// the same split SaveDir makes, so a directory of a million entries holds
// at most a few parts' nodes in memory at once. A part is saved as one
// tree blob as soon as all its entries are done; it counts what is still
// outstanding: the walker (until it has listed the whole part), each file
// being read, each subdirectory not yet saved, each hard link waiting for
// its first name's outcome. Whoever brings the count to zero saves it: the
// walker or a reader. A directory is done when all its parts are; then its
// node in the parent's part gets its Subtree and the parent's part counts
// one less. Saving is thus bottom-up without the walker waiting for files.

// capPart is up to MaxNodesPerBlob consecutive entries of one directory.
type capPart struct {
	dir     *capDir
	idx     int
	nodes   []snapshot.Node // Type "" marks an entry left out
	pending atomic.Int64    // see above

	// With a file cache: each entry's cache entry (its lookup's hit, or
	// set by the reader that read it), what the lookup found of the part's
	// record, and whether any entry is not from that record as it was
	// (cachePart).
	cache []*capEntry
	old   capOld
	fresh atomic.Bool
}

// partDone counts one outstanding item of p as done, and saves p when it
// was the last.
func (c *capturer) partDone(p *capPart) {
	if p.pending.Add(-1) > 0 {
		return
	}
	c.savePart(p)
}

// walkerPartDone is partDone for the walker, which hands the save to a
// reader rather than doing it itself: the walker's listing and stat'ing
// is the one serial stage, and in an unchanged tree, where nothing is
// read, it would otherwise encode and hash every tree too.
func (c *capturer) walkerPartDone(p *capPart) error {
	if p.pending.Add(-1) > 0 {
		return nil
	}
	select {
	case c.jobs <- &capJob{part: p, save: true}:
		return nil
	case <-c.ctx.Done():
		c.savePart(p) // only lets go of p: nothing is saved after a failure
		return c.fatal()
	}
}

// savePart saves p, all of whose entries are done, as a tree blob.
func (c *capturer) savePart(p *capPart) {
	var cached *capCached
	if c.ctx.Err() == nil && p.dir.node.Type == snapshot.TypeDir {
		cached = c.cachedEntries(p) // first: it pairs p.cache[i] with p.nodes[i], which the packing below moves
	}
	nodes := p.nodes[:0]
	for i := range p.nodes {
		if p.nodes[i].Type != "" {
			nodes = append(nodes, p.nodes[i])
		}
	}
	if len(nodes) > 0 && c.ctx.Err() == nil && p.dir.node.Type == snapshot.TypeDir {
		var saver snapshot.BlobSaver = c.r
		if c.knownTree(p) {
			saver = capKnownTree{r: c.r, keys: c.keys, tree: p.old.tree}
		}
		ids, err := snapshot.SaveDir(c.ctx, saver, c.o.tier(), nodes)
		switch {
		case err != nil:
			c.fail(fmt.Errorf("capture: saving the tree of %s: %w", p.dir.errPath(""), err))
		case len(ids) != 1:
			c.fail(fmt.Errorf("capture: internal error: %d tree blobs for one part", len(ids)))
		default:
			p.dir.ids[p.idx] = ids[0]
			if cached != nil {
				c.cachePart(p, cached, ids[0])
			}
		}
	}
	capNodes.put(p.nodes)
	p.nodes = nil
	c.dirDone(p.dir)
}

// capKnownTree saves a part's tree through r, except the tree its record
// names (capturer.knownTree): that one is indexed and may be reused, so it
// needs no lookup in the local index, one read transaction per directory
// of an unchanged tree.
type capKnownTree struct {
	r    *repo.Repository
	keys *crypt.TierKeys // the tier's, which the tree is saved in
	tree blob.ID
}

func (s capKnownTree) SaveBlob(ctx context.Context, t blob.Tier, typ blob.Type, data []byte) (blob.ID, bool, error) {
	if t == s.keys.Tier && typ == blob.Tree && s.keys.BlobID(data) == s.tree {
		return s.tree, true, nil
	}
	return s.r.SaveBlob(ctx, t, typ, data)
}

// capNodes and capStats recycle the arrays of a part's nodes and stats:
// an unchanged re-capture, which reads no file, otherwise spends much of
// what it allocates, and of its collections, on them.
var (
	capNodes capArrayPool[snapshot.Node]
	capStats capArrayPool[unix.Stat_t]
)

// capPoolLen is the length of the recycled arrays: a larger part's array
// is allocated, and left to the collector.
const capPoolLen = 256

// capArrayPool recycles arrays of capPoolLen entries, all zero.
type capArrayPool[T any] struct{ pool sync.Pool }

// get returns n zero entries.
func (q *capArrayPool[T]) get(n int) []T {
	if n > capPoolLen {
		return make([]T, n)
	}
	if s, ok := q.pool.Get().(*[]T); ok {
		return (*s)[:n]
	}
	return make([]T, n, capPoolLen)
}

// put recycles s, from get, whose entries it clears; the caller must not
// use it afterwards.
func (q *capArrayPool[T]) put(s []T) {
	if cap(s) != capPoolLen {
		return
	}
	clear(s)
	q.pool.Put(&s)
}

// dirDone counts one outstanding part of d (or the walker) as done; when
// it was the last, d's node gets its Subtree and d's parent part counts
// one less.
func (c *capturer) dirDone(d *capDir) {
	if d.pending.Add(-1) > 0 {
		return
	}
	var ids []blob.ID
	for _, id := range d.ids {
		if !id.IsNull() {
			ids = append(ids, id)
		}
	}
	d.ids = nil
	if len(ids) == 0 && c.ctx.Err() == nil && d.node.Type == snapshot.TypeDir {
		var err error
		if ids, err = snapshot.SaveDir(c.ctx, c.r, c.o.tier(), nil); err != nil {
			c.fail(fmt.Errorf("capture: saving the tree of %s: %w", d.errPath(""), err))
		}
	}
	d.node.Subtree = ids
	if d.part == nil {
		close(c.rootDone)
		return
	}
	c.partDone(d.part)
}
