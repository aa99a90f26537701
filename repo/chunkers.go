package repo

import (
	"fmt"
	"sync"

	"lifeboat/blob"
	"lifeboat/chunk"
	"lifeboat/crypt"
	"lifeboat/pack"
)

// newChunkers makes a pool of chunkers for each tier of pols, with its
// polynomial and the repository's chunk sizes. A chunker keeps its
// buffer for the bytes read past a cut from one stream to the next, so
// SaveStream takes one from the pool rather than making one each time.
func newChunkers(pols map[blob.Tier]chunk.Pol, p chunk.Params) map[blob.Tier]*sync.Pool {
	out := make(map[blob.Tier]*sync.Pool, len(pols))
	for t, pol := range pols {
		out[t] = &sync.Pool{New: func() any {
			c := chunk.New(nil, pol, p)
			c.Alloc = pack.GetBuffer // a chunk above the pooled buffer's size grows into another pooled one
			return c
		}}
	}
	return out
}

// chunker returns a chunker for tier t; putChunker gives it back.
func (r *Repository) chunker(t blob.Tier) (*chunk.Chunker, error) {
	p, ok := r.chunkers[t]
	if !ok {
		return nil, fmt.Errorf("%s tier: %w", t, crypt.ErrTierLocked)
	}
	return p.Get().(*chunk.Chunker), nil
}

// putChunker returns c, done with its stream, to tier t's pool.
func (r *Repository) putChunker(t blob.Tier, c *chunk.Chunker) {
	c.Reset(nil) // drops the stream and the bytes read past the last cut
	r.chunkers[t].Put(c)
}
