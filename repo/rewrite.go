package repo

import (
	"context"
	"errors"
	"fmt"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/pack"
)

// These methods let prune rewrite the repository: store packs it built
// from copied blobs, write and remove index objects, remove packs. They
// keep the format's write order only if the caller does: packs, then
// index objects that list them, and deletions last.

// Pack is a pack the caller fills itself with sealed blobs (prune copies
// live blobs into new packs). It is built like the packer's: streamed to a
// backend temp file where the backend takes them, so it holds no memory.
type Pack struct{ p *openPack }

// NewPack starts an empty pack of tier t. Hand it to SavePack, or to
// DiscardPack if it will not be saved.
func (r *Repository) NewPack(t blob.Tier) (*Pack, error) {
	k, err := r.keys.Tier(t)
	if err != nil {
		return nil, err
	}
	p, err := r.newPack(k)
	if err != nil {
		return nil, fmt.Errorf("starting a pack: %w", err)
	}
	return &Pack{p}, nil
}

// Fits reports whether a sealed blob of n bytes can join the pack.
func (p *Pack) Fits(n int) bool { return p.p.Fits(n) }

// Count is the number of blobs added so far.
func (p *Pack) Count() int { return p.p.Count() }

// Add appends a blob's sealed bytes, as StreamPack gives them, sealed
// with the pack's tier keys; e describes it (its offset and length are
// the pack's to set).
func (p *Pack) Add(e PackEntry, sealed []byte) error {
	return p.p.Add(pack.SealedBlob{Type: e.Type, ID: e.ID, Flags: e.Flags, PlainLen: e.PlainLen, Data: sealed})
}

// DiscardPack drops a pack that will not be saved.
func (r *Repository) DiscardPack(p *Pack) { r.discard(p.p) }

// SavePack finishes p and stores it, synchronously. The pack is not
// indexed: the caller lists it in an index object (SaveIndex) afterwards.
func (r *Repository) SavePack(ctx context.Context, p *Pack) (index.PackInfo, error) {
	size, id, entries, err := r.storePack(ctx, p.p)
	if err != nil {
		return index.PackInfo{}, err
	}
	return index.PackInfo{ID: id, Size: uint32(size), Entries: entries}, nil
}

// SaveIndex seals and stores one index object and applies it to the local index.
func (r *Repository) SaveIndex(ctx context.Context, o *index.Object) (blob.ID, error) {
	return r.saveIndexObject(ctx, o.Tier, o)
}

// LoadIndex loads and opens one index object.
func (r *Repository) LoadIndex(ctx context.Context, id blob.ID) (*index.Object, error) {
	return indexSource{r}.LoadIndex(ctx, id)
}

// RemoveFile removes one stored file; a file already gone is not an error.
func (r *Repository) RemoveFile(ctx context.Context, h backend.Handle) error {
	if err := r.be.Remove(ctx, h); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("removing %s: %w", h, err)
	}
	return nil
}

// DamagedIndex lists index objects the last SyncIndex skipped as damaged.
func (r *Repository) DamagedIndex() []blob.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]blob.ID(nil), r.damagedIndex...)
}
