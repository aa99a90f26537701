package repo

import (
	"context"
	"errors"
	"fmt"

	"github.com/zeebo/blake3"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
)

// Flush uploads every open pack, waits for all uploads, then writes index
// objects for them and records them in the local index. When it returns
// nil, every blob saved before the call is durable and indexed. A pack
// that could not be stored since the last Flush makes it fail with
// ErrPackLost (its blobs are saved again by a later save); so may one
// holding another caller's blobs, as packs are shared.
func (r *Repository) Flush(ctx context.Context) error {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		return ErrClosed
	}
	r.busy++ // Close waits for this flush and the uploads it starts
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.busy--
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
	return r.flush(ctx)
}

func (r *Repository) flush(ctx context.Context) error {
	r.uploadOpen()
	// Index what did reach storage even if some upload failed, so a retry
	// reuses it instead of leaving orphan packs.
	var errs []error
	for _, t := range blob.Tiers {
		errs = append(errs, r.writeIndex(ctx, t))
	}
	errs = append(errs, r.applyIndex())
	r.mu.Lock()
	errs = append([]error{r.unreportedLoss()}, errs...)
	r.mu.Unlock()
	return errors.Join(errs...)
}

// uploadOpen uploads every open pack, all at once, and waits for all
// uploads.
func (r *Repository) uploadOpen() {
	r.mu.Lock()
	sets := make([]*packerSet, 0, len(r.packers))
	for _, ps := range r.packers {
		sets = append(sets, ps)
	}
	r.mu.Unlock()
	for _, ps := range sets {
		ps.mu.Lock()
		var full []*openPack
		var seqs []uint64
		for i, p := range ps.packs {
			if p != nil && p.count > 0 {
				full = append(full, p)
				seqs = append(seqs, r.handOff())
				ps.packs[i] = nil
			}
		}
		ps.mu.Unlock()
		for i, p := range full {
			r.uploadSlot(ps.keys.Tier, p, seqs[i], false)
		}
	}
	r.waitUploads()
}

// writeIndex saves one index object per MaxObjectEntries for the tier's
// uploaded but unindexed packs and applies them to the local index at
// once (applyIndexLocked), with any objects a failed application left
// queued. Until applied, their blobs stay in the pending set, which
// answers lookups for them.
func (r *Repository) writeIndex(ctx context.Context, t blob.Tier) error {
	r.indexMu.Lock()
	defer r.indexMu.Unlock()
	r.mu.Lock()
	packs := r.unindexed[t]
	r.unindexed[t] = nil
	r.mu.Unlock()
	for len(packs) > 0 {
		o := &index.Object{Tier: t}
		n := 0
		for len(packs) > 0 && (n == 0 || n+len(packs[0].Entries) <= index.MaxObjectEntries) {
			o.Packs = append(o.Packs, packs[0])
			n += len(packs[0].Entries)
			packs = packs[1:]
		}
		id, err := r.storeIndexObject(ctx, t, o)
		if err != nil {
			r.mu.Lock()
			r.unindexed[t] = append(r.unindexed[t], append(o.Packs, packs...)...)
			r.mu.Unlock()
			return err
		}
		r.unapplied = append(r.unapplied, index.Named{ID: id, Object: o})
	}
	// Applied as soon as saved, not held back to merge more objects per
	// application (index.DB.ApplyAll): holding them until 65,536 entries
	// waited saved little CPU in a first capture of the benchmark corpus
	// (applying fell from 3.5% to 3.1% of it) but moved the application of
	// most of its 110,000 blobs (0.9-1.1 s on a loaded machine) to the
	// capture's last second, when few files are left to read beside it.
	return r.applyIndexLocked()
}

// applyIndex applies every saved but unapplied index object to the local
// index and drops their blobs from the pending set.
func (r *Repository) applyIndex() error {
	r.indexMu.Lock()
	defer r.indexMu.Unlock()
	return r.applyIndexLocked()
}

// applyIndexLocked is applyIndex with r.indexMu held. Objects whose
// application failed stay unapplied, their blobs pending, for the next
// try (and a later process's Sync).
func (r *Repository) applyIndexLocked() error {
	if len(r.unapplied) == 0 {
		return nil
	}
	if r.idx != nil {
		var err error
		if r.testApplyErr != nil {
			err = r.testApplyErr()
		}
		if err == nil {
			err = r.idx.ApplyChecked(r.unapplied, r.slowPacks(context.Background()))
		}
		if err != nil {
			return fmt.Errorf("%d index objects saved, but updating the local index failed: %w", len(r.unapplied), err)
		}
	}
	r.mu.Lock()
	for _, no := range r.unapplied {
		t := no.Object.Tier
		for _, p := range no.Object.Packs {
			delete(r.uploadStart, p.ID)
			for _, e := range p.Entries {
				delete(r.pending, pendingKey{t, e.Type, e.ID})
			}
		}
	}
	r.mu.Unlock()
	r.unapplied = nil
	return nil
}

// storeIndexObject seals and stores one index object.
func (r *Repository) storeIndexObject(ctx context.Context, t blob.Tier, o *index.Object) (blob.ID, error) {
	k, err := r.keys.Tier(t)
	if err != nil {
		return blob.ID{}, err
	}
	data, err := index.Seal(k, o)
	if err != nil {
		return blob.ID{}, err
	}
	id := blob.ID(blake3.Sum256(data))
	if err := r.be.Save(ctx, backend.Handle{Type: backend.Index, Name: id.String()}, data); err != nil {
		return id, fmt.Errorf("saving index object: %w", err)
	}
	return id, nil
}

// saveIndexObject stores one index object and applies it at once.
func (r *Repository) saveIndexObject(ctx context.Context, t blob.Tier, o *index.Object) (blob.ID, error) {
	id, err := r.storeIndexObject(ctx, t, o)
	if err != nil {
		return id, err
	}
	if r.idx != nil {
		if err := r.idx.Apply(id, o); err != nil {
			return id, fmt.Errorf("index object %s saved, but updating the local index failed: %w", id.Short(), err)
		}
	}
	return id, nil
}

// indexSource lets index.DB.Sync read this repository's index objects.
type indexSource struct{ r *Repository }

func (s indexSource) ListIndex(ctx context.Context, fn func(blob.ID) error) error {
	return s.r.listIDs(ctx, backend.Index, fn)
}

func (s indexSource) LoadIndex(ctx context.Context, id blob.ID) (*index.Object, error) {
	data, err := s.r.loadFile(ctx, backend.Index, id)
	if errors.Is(err, ErrCorrupt) {
		return nil, fmt.Errorf("%w: %w", index.ErrObjectDamaged, err)
	}
	if err != nil {
		return nil, err
	}
	o, err := index.Open(s.r.keys, data)
	if err != nil && !errors.Is(err, crypt.ErrTierLocked) {
		return nil, fmt.Errorf("%w: %w: index/%s: %w", ErrCorrupt, index.ErrObjectDamaged, id, err)
	}
	return o, err
}

// slowPacks returns the stored func for applying r.unapplied: a writer
// vouches that the packs it has just uploaded are stored, except those
// whose upload began longer than the session limit ago. A prune may have
// condemned such a pack as unindexed and deleted it after its margin while
// this process was stopped; the storage is asked about those, and a place
// in one that is gone is never reused (index: the unusable packs). r.indexMu
// held. nil when none is slow.
func (r *Repository) slowPacks(ctx context.Context) func(blob.ID) bool {
	r.mu.Lock()
	var slow []blob.ID
	for _, no := range r.unapplied {
		for _, p := range no.Object.Packs {
			if st, ok := r.uploadStart[p.ID]; ok && r.since(st) > r.opts.SessionLimit {
				slow = append(slow, p.ID)
			}
		}
	}
	r.mu.Unlock()
	if len(slow) == 0 {
		return nil
	}
	stored := map[blob.ID]bool{}
	for _, id := range slow {
		ok, err := indexSource{r}.PackStored(ctx, id)
		stored[id] = ok && err == nil
	}
	return func(id blob.ID) bool {
		ok, asked := stored[id]
		return ok || !asked
	}
}
