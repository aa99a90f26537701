package repo

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
	// ReadDataSubset, a percentage in (0, 100], reads only a random subset
	// of the packs (a different one each run), so that repeated runs cover
	// the repository over time.
	ReadDataSubset float64
}

// Problem is one thing Check found wrong.
type Problem struct {
	Kind   string `json:"kind"` // problems: index_damaged, pack_missing, pack_size, pack_damaged, index_entry; notices: pack_unindexed, index_stale, index_cache_rebuilt
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

// packState is what Check learns about one indexed pack.
type packState struct {
	tier    blob.Tier
	size    uint32
	indexed int // places the index has in the pack (blobs' places and copies)
	matched int // of those, places its header confirms (read-data only)
	lost    int // places in it of blobs with no place in a stored pack (when it is not stored)
	read    bool
}

// storedIndex is what Check learns from the stored index objects: which
// objects list each pack, and which object replaced which.
type storedIndex struct {
	listing      map[blob.ID][]blob.ID // pack -> index objects that list it
	supersededBy map[blob.ID]blob.ID   // index object -> an intact stored object that supersedes it
}

func (si *storedIndex) add(id blob.ID, o *index.Object) error {
	for _, p := range o.Packs {
		si.listing[p.ID] = append(si.listing[p.ID], id)
	}
	for _, old := range o.Supersedes {
		si.supersededBy[old] = id
	}
	return nil
}

// listedBy names the index objects that list pack id, and what replaced
// them, for a problem's detail.
func (si *storedIndex) listedBy(id blob.ID) string {
	objs := si.listing[id]
	if len(objs) == 0 {
		return ""
	}
	var b strings.Builder
	for i, o := range objs {
		if i == 3 {
			fmt.Fprintf(&b, " and %d more", len(objs)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "index/%s", o)
		if by, ok := si.supersededBy[o]; ok {
			fmt.Fprintf(&b, " (replaced by index/%s, which a prune or repair wrote before removing it: it was put back since)", by)
		}
	}
	return b.String()
}

// Check verifies the repository's structure: every index object loads,
// authenticates and decodes (each is read from the repository on every
// Check, whether the local index has applied it or not, and the local
// index is rebuilt when it does not hold what they say), every indexed
// pack exists with the size the index says, every stored pack is indexed,
// and every index entry lies inside its pack. A pack the index names that
// is not stored is a problem (pack_missing) when some blob it places
// there has no place in a stored pack, else a notice (index_stale): the
// index objects listing it are stale, and nothing is lost. With ReadData
// it also reads and verifies every pack of the tiers the key unlocks and
// checks that its header agrees with every place the index has in it. It
// reports problems; it never changes the repository. It may change the
// local index: a rebuild (lookups of other work on this Repository miss
// while it runs, so the CLI runs check alone), and a blob whose place is
// in a pack that is not stored moved to a stored copy.
func (r *Repository) Check(ctx context.Context, o CheckOptions) (CheckResult, error) {
	res := CheckResult{Problems: []Problem{}, Notices: []Problem{}}
	if err := r.Flush(ctx); err != nil {
		return res, err
	}
	if _, err := r.SyncIndex(ctx); err != nil {
		return res, err
	}
	si := &storedIndex{listing: map[blob.ID][]blob.ID{}, supersededBy: map[blob.ID]blob.ID{}}
	vst, err := r.idx.Verify(ctx, indexSource{r}, si.add)
	if err != nil {
		return res, err
	}
	r.mu.Lock()
	r.damagedIndex = vst.Damaged
	r.mu.Unlock()
	for _, id := range vst.Damaged {
		res.Problems = append(res.Problems, Problem{"index_damaged", "index/" + id.String(), "this index object does not decode or authenticate; `lifeboat repair index` replaces it"})
	}
	if vst.Rebuilt {
		res.Notices = append(res.Notices, Problem{"index_cache_rebuilt", r.idx.Path(), "the local index cache did not hold what the stored index objects say (it had applied an index object that is damaged now, or lacked entries) and was rebuilt from them"})
	}
	stored := map[blob.ID]int64{}
	err = r.be.List(ctx, backend.Pack, func(fi backend.FileInfo) error {
		if id, err := blob.ParseID(fi.Name); err == nil {
			stored[id] = fi.Size
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("listing packs: %w", err)
	}
	isStored := func(id blob.ID) bool { _, ok := stored[id]; return ok }
	packs := map[blob.ID]*packState{}
	var missing []blob.ID
	err = r.idx.ForEachPack(func(id blob.ID, t blob.Tier, size uint32) error {
		packs[id] = &packState{tier: t, size: size}
		res.Packs++
		switch got, ok := stored[id]; {
		case !ok:
			missing = append(missing, id)
		case got != int64(size):
			res.Problems = append(res.Problems, Problem{"pack_size", "data/" + id.String(), fmt.Sprintf("stored size %d, index says %d", got, size)})
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	// A place in a pack that is not stored is never reused by dedup.
	if err := r.idx.MarkGone(isStored); err != nil {
		return res, err
	}
	if len(missing) > 0 {
		// A blob placed in a pack that is gone, with a copy in one that is
		// stored, is read from the copy, and the snapshot check sees it so.
		if _, err := r.idx.PreferStored(isStored); err != nil {
			return res, err
		}
	}
	for _, t := range r.keys.Tiers() {
		err := r.idx.ForEachBlobCopies(t, func(locs []index.Location) error {
			res.Blobs++
			lost := !slices.ContainsFunc(locs, func(l index.Location) bool { return packs[l.Pack] != nil && isStored(l.Pack) })
			for _, loc := range locs {
				p := packs[loc.Pack]
				switch {
				case p == nil:
					res.Problems = append(res.Problems, Problem{"index_entry", "data/" + loc.Pack.String(), fmt.Sprintf("blob %s points into a pack the index does not list", loc.ID.Short())})
				case int64(loc.Offset)+int64(loc.Length) > int64(p.size):
					res.Problems = append(res.Problems, Problem{"index_entry", "data/" + loc.Pack.String(), fmt.Sprintf("blob %s lies past the pack's end", loc.ID.Short())})
				default:
					p.indexed++
					if lost {
						p.lost++
					}
				}
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	slices.SortFunc(missing, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range missing {
		p, by := packs[id], si.listedBy(id)
		if p.lost > 0 {
			if by != "" {
				by = "; listed by " + by
			}
			res.Problems = append(res.Problems, Problem{"pack_missing", "data/" + id.String(),
				fmt.Sprintf("the index names this pack but it is not stored: %d blobs it places there are stored nowhere else%s; run `lifeboat repair index`", p.lost, by)})
			continue
		}
		obj := "data/" + id.String()
		if objs := si.listing[id]; len(objs) > 0 {
			obj = "index/" + objs[0].String()
		}
		res.Notices = append(res.Notices, Problem{"index_stale", obj,
			fmt.Sprintf("the index names pack data/%s, which is not stored, but every blob it places there is stored in another pack, so nothing is lost: %s is stale (put back after a prune or repair removed it, or left from an old copy of the repository); `lifeboat repair index` rewrites the index without it", id, cmp.Or(by, "the index object listing it"))})
	}
	for id, size := range stored {
		if packs[id] != nil {
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
	if o.ReadData || o.ReadDataSubset > 0 {
		toRead := packs
		if !o.ReadData {
			toRead = subset(packs, o.ReadDataSubset)
		}
		probs, n, err := r.readAllPacks(ctx, toRead)
		res.Problems = append(res.Problems, probs...)
		res.ReadBytes = n
		if err != nil {
			return res, err
		}
		for id, p := range packs {
			if p.read && p.indexed != p.matched {
				res.Problems = append(res.Problems, Problem{"index_entry", "data/" + id.String(),
					fmt.Sprintf("the index places %d blobs in this pack that its header does not list there; run `lifeboat repair index`", p.indexed-p.matched)})
			}
		}
	}
	return res, ctx.Err()
}

// subset picks about pct percent of the packs at random.
func subset(packs map[blob.ID]*packState, pct float64) map[blob.ID]*packState {
	seed := rand.Uint64()
	out := map[blob.ID]*packState{}
	for id, p := range packs {
		if float64((binary.LittleEndian.Uint64(id[:8])^seed)%10000) < pct*100 {
			out[id] = p
		}
	}
	return out
}

// readAllPacks verifies every indexed pack with two readers, and counts the
// places the index has in each pack that its header confirms.
func (r *Repository) readAllPacks(ctx context.Context, packs map[blob.ID]*packState) ([]Problem, int64, error) {
	var mu sync.Mutex
	var probs []Problem
	var total int64
	var firstErr error
	problem := func(p Problem) {
		mu.Lock()
		probs = append(probs, p)
		mu.Unlock()
	}
	ids := make(chan blob.ID)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				h := backend.Handle{Type: backend.Pack, Name: id.String()}
				data, err := r.be.Load(ctx, h, 0, 0)
				if errors.Is(err, backend.ErrNotFound) {
					continue // already reported as pack_missing
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("reading %s: %w", h, err)
					}
					mu.Unlock()
					continue
				}
				tr, entries, err := pack.Verify(data, id, r.keys.Tier)
				if err != nil {
					switch {
					case !errors.Is(err, crypt.ErrTierLocked):
						problem(Problem{"pack_damaged", h.String(), err.Error()})
					case hasTier(r.keys.Tiers(), packs[id].tier):
						// An index object of a tier this key holds lists a
						// pack of a tier it cannot open: tampering or damage.
						problem(Problem{"index_entry", h.String(), fmt.Sprintf("the %s-tier index places blobs in this pack, but the pack belongs to a tier the key in use cannot open; the index is damaged or was tampered with (`lifeboat repair index` rebuilds it)", packs[id].tier)})
					}
					continue
				}
				matched := 0
				for _, e := range entries {
					locs, err := r.idx.LookupAll(tr.Tier, e.Type, e.ID)
					if err != nil {
						problem(Problem{"index_entry", h.String(), err.Error()})
						continue
					}
					here, same := 0, 0
					for _, loc := range locs {
						if loc.Pack == id {
							here++
							if loc.Entry == e {
								same++
							}
						}
					}
					matched += same
					if here > 0 && same == 0 {
						problem(Problem{"index_entry", h.String(), fmt.Sprintf("the index places blob %s at a different offset or length than the pack header", e.ID.Short())})
					}
				}
				mu.Lock()
				total += int64(len(data))
				packs[id].matched, packs[id].read = matched, true
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
