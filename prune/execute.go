package prune

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/repo"
)

// ExecOptions tune Execute.
type ExecOptions struct {
	// Lock takes the exclusive repository lock for the delete phase
	// (required). The caller should hold a prune lock for the whole run and
	// pass its owner, so the two do not conflict.
	Lock func(ctx context.Context) (*repo.Lock, error)
	// ForgetDamaged removes the plan's damaged snapshots.
	ForgetDamaged bool
	// Progress, when set, is told what phase starts.
	Progress func(phase string)
	// Held, when set, is the prune lock the caller holds: a two-phase
	// prune checks it is not lost before it condemns and before each
	// delete (a one-phase prune checks Lock's).
	Held *repo.Lock
}

// Stats says what Execute did.
type Stats struct {
	PacksWritten       int    `json:"packs_written"`
	BlobsCopied        int    `json:"blobs_copied"`
	IndexWritten       int    `json:"index_written"`
	IndexRemoved       int    `json:"index_removed"`
	PacksDeleted       int    `json:"packs_deleted"`
	BytesDeleted       uint64 `json:"bytes_deleted"`
	Rescued            int    `json:"rescued"`             // planned deletions kept because a new snapshot uses them
	NewSnapshots       int    `json:"new_snapshots"`       // snapshots that appeared while prune planned
	SnapshotsForgotten int    `json:"snapshots_forgotten"` // damaged snapshots removed
	// Two-phase: packs condemned by this run, and condemnation objects
	// removed (executed, or not decodable).
	PacksCondemned       int `json:"packs_condemned"`
	CondemnationsRemoved int `json:"condemnations_removed"`
}

// repackBatch bounds the live entries Execute collects at once.
const repackBatch = 200_000

// Execute carries out the plan:
//  1. copy the live blobs of the packs to repack into new packs (sealed
//     bytes are copied as they are, after being verified: the format's
//     blob AAD does not include the offset) and write index objects for them;
//  2. take the exclusive lock, sync the index, and mark any snapshot that
//     appeared since the plan; a pack one of them needs is kept (rescued);
//  3. write index objects for the kept packs of every old index object
//     that lists a pack to delete, then delete those old index objects;
//  4. delete the packs, last.
//
// With ForgetDamaged, the damaged snapshots are forgotten in step 4 unless
// a pin holds one (checked again under the exclusive lock): then Execute
// stops before it deletes anything.
//
// A crash at any point leaves every kept snapshot readable: until step 3
// ends, the old index still lists every old pack; in step 4 no index lists
// what is deleted. Running prune again finishes the job (unindexed packs
// are deleted then).
func (p *Plan) Execute(ctx context.Context, r *repo.Repository, src Source, o ExecOptions) (Stats, error) {
	var st Stats
	if len(p.Damaged) > 0 && !o.ForgetDamaged {
		return st, fmt.Errorf("%w: the plan has damaged snapshots and ForgetDamaged is not set", repo.ErrDamaged)
	}
	if p.TwoPhase {
		return p.executeTwoPhase(ctx, r, src, o)
	}
	if o.Lock == nil {
		return st, errors.New("prune: ExecOptions.Lock is required")
	}
	progress := func(s string) {
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	if len(p.Repack) > 0 {
		progress("repack")
		if err := p.repackAll(ctx, r, &st); err != nil {
			return st, fmt.Errorf("repacking (nothing was deleted): %w", err)
		}
	}
	progress("lock")
	lock, err := o.Lock(ctx)
	if err != nil {
		return st, err
	}
	defer func() { _ = lock.Unlock(context.WithoutCancel(ctx)) }()
	progress("recheck")
	if _, err := r.SyncIndex(ctx); err != nil {
		return st, err
	}
	if o.ForgetDamaged && len(p.Damaged) > 0 {
		// Pins again, now that no capture (nor a lifecycle setting a pin
		// beside one) can run: one may hold a damaged snapshot since the plan.
		if err := p.checkHeld(ctx, r); err != nil {
			return st, err
		}
	}
	rescued, err := p.rescue(ctx, r, src, &st)
	if err != nil {
		return st, err
	}
	garbage, err := p.unindexedNow(ctx, r)
	if err != nil {
		return st, err
	}
	gone, affected, err := p.replaceIndex(ctx, r, rescued, o.ForgetDamaged, lock.Err, progress, &st)
	if err != nil {
		return st, err
	}
	deleted := map[blob.ID]bool{}
	del := func(pi PackInfo) error {
		if err := lock.Err(); err != nil {
			return err
		}
		if err := r.RemoveFile(ctx, backend.Handle{Type: backend.Pack, Name: pi.ID.String()}); err != nil {
			return err
		}
		st.PacksDeleted++
		st.BytesDeleted += pi.Size
		deleted[pi.ID] = true
		return nil
	}
	for _, list := range [][]PackInfo{p.Delete, p.Repack} {
		for _, pi := range list {
			if gone(pi.ID) {
				if err := del(pi); err != nil {
					return st, err
				}
			}
		}
	}
	for _, pi := range garbage {
		if err := del(pi); err != nil {
			return st, err
		}
	}
	progress("sync")
	// Drop what was deleted from the local index instead of rebuilding it.
	if err := r.Index().Drop(affected, deleted); err != nil {
		return st, err
	}
	_, err = r.SyncIndex(ctx)
	return st, err
}

// repackAll copies the live blobs of the packs to repack into new packs.
func (p *Plan) repackAll(ctx context.Context, r *repo.Repository, st *Stats) error {
	rw := &rewriter{r: r, st: st, writers: map[blob.Tier]*repo.Pack{}, objects: map[blob.Tier]*index.Object{}}
	defer func() { // packs left open by an error: their temp files go
		for _, w := range rw.writers {
			r.DiscardPack(w)
		}
	}()
	for start := 0; start < len(p.Repack); {
		batch := map[blob.ID][]repo.PackEntry{}
		n := 0
		end := start
		for end < len(p.Repack) && (end == start || n+p.Repack[end].LiveBlobs <= repackBatch) {
			batch[p.Repack[end].ID] = nil
			n += p.Repack[end].LiveBlobs
			end++
		}
		err := p.mergeIndex(r, func(loc index.Location, _ key, live bool) error {
			if es, ok := batch[loc.Pack]; ok && live {
				batch[loc.Pack] = append(es, loc.Entry)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, pi := range p.Repack[start:end] {
			if err := rw.copyPack(ctx, pi, batch[pi.ID]); err != nil {
				return err
			}
		}
		start = end
	}
	return rw.finish(ctx)
}

// rewriter fills new packs with copied blobs and indexes them.
type rewriter struct {
	r       *repo.Repository
	st      *Stats
	writers map[blob.Tier]*repo.Pack
	objects map[blob.Tier]*index.Object
}

// Ranges of a pack read at once: live blobs closer than rangeGap are read
// together, up to rangeMax bytes, so a sparse pack is not read whole and
// memory stays at one range.
const (
	rangeGap = 64 << 10
	rangeMax = 4 << 20
)

// copyPack copies the live blobs entries of pack pi into the new packs,
// each verified (decrypted, decompressed, re-hashed) and copied as it is
// stored. The error names the first blob, in pack order, that does not
// verify; the blobs added before it only went to new packs that are then
// discarded.
func (rw *rewriter) copyPack(ctx context.Context, pi PackInfo, entries []repo.PackEntry) error {
	slices.SortFunc(entries, func(a, b repo.PackEntry) int { return cmp.Compare(a.Offset, b.Offset) })
	err := rw.r.StreamPack(ctx, pi.Tier, pi.ID, entries, repo.StreamOptions{Gap: rangeGap, MaxRead: rangeMax, Copy: true},
		func(i int, sealed, _ []byte) error { return rw.addBlob(ctx, pi.Tier, entries[i], sealed) })
	if se := (*repo.StreamError)(nil); errors.As(err, &se) && errors.Is(err, repo.ErrCorrupt) {
		return fmt.Errorf("copying live blobs: %w; run `lifeboat check --read-data`", err)
	}
	return err
}

// addBlob adds a verified blob's sealed bytes, as they are, to the tier's
// open pack.
func (rw *rewriter) addBlob(ctx context.Context, t blob.Tier, e repo.PackEntry, sealed []byte) error {
	var err error
	w := rw.writers[t]
	if w != nil && !w.Fits(len(sealed)) {
		if err := rw.flushPack(ctx, t); err != nil {
			return err
		}
		w = nil
	}
	if w == nil {
		if w, err = rw.r.NewPack(t); err != nil {
			return err
		}
		rw.writers[t] = w
	}
	if err := w.Add(e, sealed); err != nil {
		delete(rw.writers, t)
		rw.r.DiscardPack(w)
		return fmt.Errorf("adding live blob %s to a new pack: %w", e.ID.Short(), err)
	}
	rw.st.BlobsCopied++
	return nil
}

// flushPack stores the tier's open pack and indexes it once enough wait.
func (rw *rewriter) flushPack(ctx context.Context, t blob.Tier) error {
	w := rw.writers[t]
	delete(rw.writers, t)
	if w == nil || w.Count() == 0 {
		return nil
	}
	info, err := rw.r.SavePack(ctx, w)
	if err != nil {
		return err
	}
	rw.st.PacksWritten++
	o := rw.objects[t]
	if o == nil {
		o = &index.Object{Tier: t}
		rw.objects[t] = o
	}
	o.Packs = append(o.Packs, info)
	if o.Entries() >= index.MaxObjectEntries {
		return rw.flushIndex(ctx, t)
	}
	return nil
}

func (rw *rewriter) flushIndex(ctx context.Context, t blob.Tier) error {
	o := rw.objects[t]
	delete(rw.objects, t)
	if o == nil || len(o.Packs) == 0 {
		return nil
	}
	if _, err := rw.r.SaveIndex(ctx, o); err != nil {
		return err
	}
	rw.st.IndexWritten++
	return nil
}

func (rw *rewriter) finish(ctx context.Context) error {
	for _, t := range blob.Tiers {
		if err := rw.flushPack(ctx, t); err != nil {
			return err
		}
		if err := rw.flushIndex(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// rescue marks the snapshots that appeared since the plan (their trees
// not walked before) and returns the condemned packs they need.
func (p *Plan) rescue(ctx context.Context, r *repo.Repository, src Source, st *Stats) (map[blob.ID]bool, error) {
	delta := newLiveSet(p.dir, p.runKeys)
	defer delta.Remove()
	ids, err := src.Snapshots(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	// A snapshot is stored after the index objects of what it references:
	// synced after the listing, the index has the blobs of every snapshot
	// listed (one stored after an earlier sync would not be walkable).
	if _, err := r.SyncIndex(ctx); err != nil {
		return nil, err
	}
	m := &marker{live: delta, trees: p.trees}
	for _, id := range ids {
		if p.marked[id] {
			continue
		}
		if err := src.Reach(ctx, id, m); err != nil {
			return nil, fmt.Errorf("snapshot %s appeared while prune planned and cannot be walked; nothing was deleted: %w", id.Short(), err)
		}
		p.marked[id] = true
		st.NewSnapshots++
	}
	rescued := map[blob.ID]bool{}
	it, err := delta.Iter()
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for {
		k, ok, err := it.Next()
		if err != nil || !ok {
			return rescued, err
		}
		loc, found, err := r.Index().Lookup(blob.Tier(k[0]), blob.Type(k[1]), blob.ID(k[2:]))
		if err != nil {
			return nil, err
		}
		if found && p.condemned[loc.Pack] && !rescued[loc.Pack] {
			rescued[loc.Pack] = true
			st.Rescued++
		}
	}
}

// unindexedNow lists stored packs that no index object lists, now that the
// exclusive lock is held (no writer can be between a pack and its index).
func (p *Plan) unindexedNow(ctx context.Context, r *repo.Repository) ([]PackInfo, error) {
	var out []PackInfo
	err := r.Backend().List(ctx, backend.Pack, func(fi backend.FileInfo) error {
		id, err := blob.ParseID(fi.Name)
		if err != nil {
			return nil
		}
		known, err := r.Index().HasPack(id)
		if err != nil || known {
			return err
		}
		out = append(out, PackInfo{ID: id, Size: uint64(fi.Size)})
		return nil
	})
	slices.SortFunc(out, func(a, b PackInfo) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out, err
}

// rewriteIndex writes, for every old index object that lists a pack about
// to go, a replacement listing its other packs; the last object of each
// tier names the objects it supersedes. It returns those old objects.
func (p *Plan) rewriteIndex(ctx context.Context, r *repo.Repository, gone func(blob.ID) bool, st *Stats) ([]blob.ID, error) {
	ids := make([]blob.ID, 0, len(p.oldObjects))
	for id := range p.oldObjects {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	building := map[blob.Tier]*index.Object{}
	superseded := map[blob.Tier][]blob.ID{}
	var affected []blob.ID
	save := func(o *index.Object) error {
		if _, err := r.SaveIndex(ctx, o); err != nil {
			return err
		}
		st.IndexWritten++
		return nil
	}
	for _, id := range ids {
		o, err := r.LoadIndex(ctx, id)
		if errors.Is(err, crypt.ErrTierLocked) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(o.Packs, func(pi index.PackInfo) bool { return gone(pi.ID) }) {
			continue
		}
		affected = append(affected, id)
		superseded[o.Tier] = append(superseded[o.Tier], id)
		b := building[o.Tier]
		if b == nil {
			b = &index.Object{Tier: o.Tier}
			building[o.Tier] = b
		}
		for _, pi := range o.Packs {
			if gone(pi.ID) {
				continue
			}
			b.Packs = append(b.Packs, pi)
			if b.Entries() >= index.MaxObjectEntries {
				if err := save(b); err != nil {
					return nil, err
				}
				b = &index.Object{Tier: o.Tier}
				building[o.Tier] = b
			}
		}
	}
	for _, t := range blob.Tiers {
		if len(superseded[t]) == 0 {
			continue
		}
		b := building[t]
		b.Supersedes = superseded[t]
		if err := save(b); err != nil {
			return nil, err
		}
	}
	return affected, nil
}

// replaceIndex is the first part of both delete phases: it writes the
// index objects that replace those listing a pack that goes (gone: the
// condemned packs not rescued), then removes the damaged snapshots (with
// forget) and the replaced index objects, checking held before each
// removal. It returns gone and the removed index objects.
func (p *Plan) replaceIndex(ctx context.Context, r *repo.Repository, rescued map[blob.ID]bool, forget bool, held func() error,
	progress func(string), st *Stats) (gone func(blob.ID) bool, affected []blob.ID, err error) {
	gone = func(id blob.ID) bool { return p.condemned[id] && !rescued[id] }
	if len(p.condemned) > len(rescued) { // otherwise no index object lists a pack that goes
		progress("index")
		if affected, err = p.rewriteIndex(ctx, r, gone, st); err != nil {
			return nil, nil, fmt.Errorf("writing the new index (nothing was deleted): %w", err)
		}
	}
	progress("delete")
	remove := func(h backend.Handle) error {
		if err := held(); err != nil {
			return err
		}
		return r.RemoveFile(ctx, h)
	}
	if forget {
		for _, d := range p.Damaged {
			if err := remove(backend.Handle{Type: backend.Snapshot, Name: d.ID.String()}); err != nil {
				return nil, nil, err
			}
			st.SnapshotsForgotten++
		}
	}
	for _, id := range affected {
		if err := remove(backend.Handle{Type: backend.Index, Name: id.String()}); err != nil {
			return nil, nil, err
		}
		st.IndexRemoved++
	}
	return gone, affected, nil
}
