package repo

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/pack"
)

// PackProblem names a pack that could not be read, and why.
type PackProblem struct {
	Pack  string `json:"pack"`
	Error string `json:"error"`
}

// RepairStats reports what RepairIndex did.
type RepairStats struct {
	Packs          int           `json:"packs"`           // packs whose headers were read
	Blobs          int           `json:"blobs"`           // blob entries indexed
	LockedPacks    int           `json:"locked_packs"`    // packs of tiers the key cannot open, left to their old index objects
	Damaged        []PackProblem `json:"damaged"`         // packs left out of the new index
	ObjectsWritten int           `json:"objects_written"` // new index objects
	ObjectsRemoved int           `json:"objects_removed"` // old index objects replaced
}

type headerResult struct {
	info index.PackInfo
	tier blob.Tier
	err  error
}

// RepairIndex rebuilds the index objects of every tier the key unlocks from
// the pack headers alone, then removes the old index objects of those
// tiers. New objects are saved before any old one is removed, so an
// interruption leaves a repository whose index is at worst duplicated.
// Damaged packs are reported and left out; they are never deleted.
func (r *Repository) RepairIndex(ctx context.Context) (RepairStats, error) {
	st := RepairStats{Damaged: []PackProblem{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the header readers if we return early
	if err := r.Flush(ctx); err != nil {
		return st, err
	}
	old, err := r.indexObjectsByTier(ctx)
	if err != nil {
		return st, err
	}
	var packs []backend.FileInfo
	if err := r.be.List(ctx, backend.Pack, func(fi backend.FileInfo) error { packs = append(packs, fi); return nil }); err != nil {
		return st, fmt.Errorf("listing packs: %w", err)
	}
	building := map[blob.Tier]*index.Object{}
	flush := func(t blob.Tier, last bool) error {
		o := building[t]
		if o == nil || (len(o.Packs) == 0 && !last) {
			return nil
		}
		if last {
			o.Supersedes = old[t]
		}
		if _, err := r.saveIndexObject(ctx, t, o); err != nil {
			return err
		}
		st.ObjectsWritten++
		building[t] = &index.Object{Tier: t}
		return nil
	}
	for res := range r.readHeaders(ctx, packs) {
		switch {
		case errors.Is(res.err, crypt.ErrTierLocked):
			st.LockedPacks++
			continue
		case errors.Is(res.err, pack.ErrFormat) || errors.Is(res.err, crypt.ErrAuth) || errors.Is(res.err, backend.ErrShortRead):
			st.Damaged = append(st.Damaged, PackProblem{Pack: res.info.ID.String(), Error: res.err.Error()})
			continue
		case res.err != nil:
			return st, fmt.Errorf("reading header of data/%s (nothing was changed): %w", res.info.ID, res.err)
		}
		o := building[res.tier]
		if o == nil {
			o = &index.Object{Tier: res.tier}
			building[res.tier] = o
		}
		o.Packs = append(o.Packs, res.info)
		st.Packs++
		st.Blobs += len(res.info.Entries)
		if o.Entries() >= index.MaxObjectEntries {
			if err := flush(res.tier, false); err != nil {
				return st, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	for _, t := range r.keys.Tiers() {
		if building[t] == nil && len(old[t]) == 0 {
			continue
		}
		if building[t] == nil {
			building[t] = &index.Object{Tier: t}
		}
		if err := flush(t, true); err != nil {
			return st, err
		}
		for _, id := range old[t] {
			if err := r.be.Remove(ctx, backend.Handle{Type: backend.Index, Name: id.String()}); err != nil && !errors.Is(err, backend.ErrNotFound) {
				return st, fmt.Errorf("removing old index/%s: %w", id, err)
			}
			st.ObjectsRemoved++
		}
	}
	_, err = r.SyncIndex(ctx)
	return st, err
}

// indexObjectsByTier groups the existing index objects the key can open by
// their authenticated tier. Damaged objects are included (under the
// workspace tier) only when the key unlocks every tier: otherwise one might
// belong to a tier this key cannot rebuild, and it is left alone.
func (r *Repository) indexObjectsByTier(ctx context.Context) (map[blob.Tier][]blob.ID, error) {
	out := map[blob.Tier][]blob.ID{}
	all := len(r.keys.Tiers()) == len(blob.Tiers)
	src := indexSource{r}
	err := r.listIDs(ctx, backend.Index, func(id blob.ID) error {
		o, err := src.LoadIndex(ctx, id)
		switch {
		case err == nil:
			out[o.Tier] = append(out[o.Tier], id)
		case errors.Is(err, index.ErrObjectDamaged):
			if all {
				out[blob.Workspace] = append(out[blob.Workspace], id)
			}
		case !errors.Is(err, crypt.ErrTierLocked):
			return err
		}
		return nil
	})
	return out, err
}

// readHeaders reads pack headers with a few workers and streams results.
func (r *Repository) readHeaders(ctx context.Context, packs []backend.FileInfo) <-chan headerResult {
	in := make(chan backend.FileInfo)
	out := make(chan headerResult)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fi := range in {
				select {
				case out <- r.readHeader(ctx, fi):
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(in)
		for _, fi := range packs {
			select {
			case in <- fi:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(out) }()
	return out
}

func (r *Repository) readHeader(ctx context.Context, fi backend.FileInfo) headerResult {
	id, err := blob.ParseID(fi.Name)
	if err != nil {
		return headerResult{err: fmt.Errorf("%w: bad pack name %q", pack.ErrFormat, fi.Name)}
	}
	h := backend.Handle{Type: backend.Pack, Name: fi.Name}
	load := func(ctx context.Context, off int64, n int) ([]byte, error) { return r.be.Load(ctx, h, off, n) }
	tr, entries, err := pack.ReadHeader(ctx, fi.Size, load, r.keys.Tier)
	return headerResult{info: index.PackInfo{ID: id, Size: uint32(fi.Size), Entries: entries}, tier: tr.Tier, err: err}
}
