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

// CheckOptions choose how deep Check looks.
type CheckOptions struct {
	// ReadData downloads every pack and verifies its hash, header and
	// every blob (decrypt, decompress, re-hash).
	ReadData bool
}

// Problem is one thing Check found wrong.
type Problem struct {
	Kind   string `json:"kind"` // pack_missing, pack_size, pack_damaged, pack_unindexed, index_entry
	Object string `json:"object"`
	Detail string `json:"detail"`
}

// CheckResult is what Check found.
type CheckResult struct {
	Packs       int       `json:"packs"`        // indexed packs checked
	Blobs       int       `json:"blobs"`        // indexed blobs checked
	ReadBytes   int64     `json:"read_bytes"`   // pack bytes read and verified
	LockedPacks int       `json:"locked_packs"` // packs of tiers the key cannot open (not checked)
	Problems    []Problem `json:"problems"`     // damage: check fails
	Notices     []Problem `json:"notices"`      // harmless leftovers, such as packs of an interrupted save
}

// Check verifies the repository's structure: every indexed pack exists
// with the size the index says, every stored pack is indexed, and every
// index entry lies inside its pack. With ReadData it also reads and
// verifies every pack of the tiers the key unlocks. It reports problems;
// it never changes the repository.
func (r *Repository) Check(ctx context.Context, o CheckOptions) (CheckResult, error) {
	res := CheckResult{Problems: []Problem{}, Notices: []Problem{}}
	if err := r.Flush(ctx); err != nil {
		return res, err
	}
	if _, err := r.SyncIndex(ctx); err != nil {
		return res, err
	}
	stored := map[blob.ID]int64{}
	err := r.be.List(ctx, backend.Pack, func(fi backend.FileInfo) error {
		id, err := blob.ParseID(fi.Name)
		if err == nil {
			stored[id] = fi.Size
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("listing packs: %w", err)
	}
	indexed := map[blob.ID]uint32{}
	err = r.idx.ForEachPack(func(id blob.ID, _ blob.Tier, size uint32) error {
		indexed[id] = size
		res.Packs++
		size2, ok := stored[id]
		switch {
		case !ok:
			res.Problems = append(res.Problems, Problem{"pack_missing", "data/" + id.String(), "the index names this pack but it is not stored; run `lifeboat repair index`"})
		case size2 != int64(size):
			res.Problems = append(res.Problems, Problem{"pack_size", "data/" + id.String(), fmt.Sprintf("stored size %d, index says %d", size2, size)})
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	for _, t := range r.keys.Tiers() {
		err := r.idx.ForEachBlob(t, func(loc index.Location) error {
			res.Blobs++
			if size, ok := indexed[loc.Pack]; ok && int64(loc.Offset)+int64(loc.Length) > int64(size) {
				res.Problems = append(res.Problems, Problem{"index_entry", "data/" + loc.Pack.String(), fmt.Sprintf("blob %s lies past the pack's end", loc.ID.Short())})
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	for id, size := range stored {
		if _, ok := indexed[id]; ok {
			continue
		}
		hr := r.readHeader(ctx, backend.FileInfo{Name: id.String(), Size: size})
		switch {
		case errors.Is(hr.err, crypt.ErrTierLocked):
			res.LockedPacks++
		case hr.err != nil:
			res.Problems = append(res.Problems, Problem{"pack_damaged", "data/" + id.String(), hr.err.Error()})
		default:
			res.Notices = append(res.Notices, Problem{"pack_unindexed", "data/" + id.String(), "stored but not indexed, left by an interrupted save; `lifeboat repair index` indexes it"})
		}
	}
	if o.ReadData {
		probs, n, err := r.readAllPacks(ctx, indexed)
		res.Problems = append(res.Problems, probs...)
		res.ReadBytes = n
		if err != nil {
			return res, err
		}
	}
	return res, ctx.Err()
}

// readAllPacks verifies every indexed pack with two readers.
func (r *Repository) readAllPacks(ctx context.Context, packs map[blob.ID]uint32) ([]Problem, int64, error) {
	var mu sync.Mutex
	var probs []Problem
	var total int64
	var firstErr error
	ids := make(chan blob.ID)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				h := backend.Handle{Type: backend.Pack, Name: id.String()}
				data, err := r.be.Load(ctx, h, 0, 0)
				mu.Lock()
				total += int64(len(data))
				mu.Unlock()
				if errors.Is(err, backend.ErrNotFound) {
					continue // already reported as pack_missing
				}
				if err == nil {
					_, _, err = pack.Verify(data, id, r.keys.Tier)
					if err != nil && !errors.Is(err, crypt.ErrTierLocked) {
						mu.Lock()
						probs = append(probs, Problem{"pack_damaged", h.String(), err.Error()})
						mu.Unlock()
					}
					continue
				}
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("reading %s: %w", h, err)
				}
				mu.Unlock()
			}
		}()
	}
	for id := range packs {
		select {
		case ids <- id:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(ids)
	wg.Wait()
	return probs, total, firstErr
}
