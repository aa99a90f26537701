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

// SavePack finishes w, a pack built in memory (pack.NewWriter), and
// stores it, synchronously. The pack is not
// indexed: the caller lists it in an index object (SaveIndex) afterwards.
func (r *Repository) SavePack(ctx context.Context, w *pack.Writer) (index.PackInfo, error) {
	data, size, id, entries, err := w.Finish()
	if err != nil {
		return index.PackInfo{}, fmt.Errorf("writing a pack: %w", err)
	}
	defer pack.ReleasePack(data)
	h := backend.Handle{Type: backend.Pack, Name: id.String()}
	if err := r.be.Save(ctx, h, data); err != nil {
		return index.PackInfo{}, fmt.Errorf("saving %s: %w", h, err)
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
