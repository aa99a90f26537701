package repo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/pack"
)

type packerKey struct {
	tier blob.Tier
	typ  blob.Type
}

// packerSet holds the open packs of one tier and blob type. Each blob goes
// to one of them at random, so the blobs of a file scatter over packs and
// pack sizes say little about chunk boundaries.
type packerSet struct {
	mu      sync.Mutex
	keys    *crypt.TierKeys
	writers []*pack.Writer
}

// pack seals one blob and adds it to a random open pack of its tier and
// type, uploading the pack when it reaches the target size.
func (r *Repository) pack(k *crypt.TierKeys, typ blob.Type, id blob.ID, data []byte) error {
	sb, err := pack.SealBlob(k, typ, id, data, r.opts.Compress)
	if err != nil {
		return err
	}
	ps := r.packerSet(k, typ)
	ps.mu.Lock()
	i := rand.IntN(len(ps.writers))
	var full *pack.Writer
	if !ps.writers[i].Fits(len(sb.Data)) {
		full, ps.writers[i] = ps.writers[i], pack.NewWriter(k, r.opts.PackSize)
	}
	ps.writers[i].Add(sb)
	sb.Release()
	ps.mu.Unlock()
	if full != nil {
		r.upload(k.Tier, full)
	}
	return nil
}

func (r *Repository) packerSet(k *crypt.TierKeys, typ blob.Type) *packerSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := packerKey{k.Tier, typ}
	ps := r.packers[key]
	if ps == nil {
		ps = &packerSet{keys: k}
		for range r.opts.Packers {
			ps.writers = append(ps.writers, pack.NewWriter(k, r.opts.PackSize))
		}
		r.packers[key] = ps
	}
	return ps
}

// upload finishes w and saves it in the background, at most Options.Uploads
// at a time; it blocks while that many are in flight. Uploads run under the
// repository's own context, not a caller's, so a caller that gives up
// cannot drop a pack holding other callers' blobs. Failures are sticky and
// surface from the next SaveBlob or Flush.
func (r *Repository) upload(t blob.Tier, w *pack.Writer) {
	r.uploads <- struct{}{}
	r.mu.Lock()
	r.uploadSeq++
	seq := r.uploadSeq
	r.inflight[seq] = true
	r.mu.Unlock()
	go func() {
		err := r.savePack(r.bg, t, w)
		<-r.uploads
		r.mu.Lock()
		if err != nil && r.err == nil {
			r.err = err
		}
		delete(r.inflight, seq)
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
}

// savePack writes one pack and records its blobs as uploaded. Once enough
// packs wait for an index object, it writes one.
func (r *Repository) savePack(ctx context.Context, t blob.Tier, w *pack.Writer) error {
	data, id, entries := w.Finish()
	size := len(data)
	h := backend.Handle{Type: backend.Pack, Name: id.String()}
	err := r.be.Save(ctx, h, data)
	pack.ReleasePack(data)
	if err != nil {
		return fmt.Errorf("saving %s: %w", h, err)
	}
	r.mu.Lock()
	for _, e := range entries {
		if p := r.pending[pendingKey{t, e.Type, e.ID}]; p != nil {
			p.loc, p.uploaded = index.Location{Pack: id, Entry: e}, true
		}
	}
	r.unindexed[t] = append(r.unindexed[t], index.PackInfo{ID: id, Size: uint32(size), Entries: entries})
	n := 0
	for _, p := range r.unindexed[t] {
		n += len(p.Entries)
	}
	due := n >= index.MaxObjectEntries || len(r.unindexed[t]) >= indexEveryPacks
	r.mu.Unlock()
	if due {
		return r.writeIndex(ctx, t)
	}
	return nil
}

// waitUploads returns once every upload started before the call is done.
// Uploads started later do not hold it up.
func (r *Repository) waitUploads() {
	r.mu.Lock()
	defer r.mu.Unlock()
	target := r.uploadSeq
	for r.uploadsBefore(target) {
		r.cond.Wait()
	}
}

// uploadsBefore reports whether an upload numbered target or lower is in
// flight. r.mu held.
func (r *Repository) uploadsBefore(target uint64) bool {
	for seq := range r.inflight {
		if seq <= target {
			return true
		}
	}
	return false
}

// indexEveryPacks bounds how many uploaded packs wait for an index object,
// so an interrupted session leaves most of its uploads reusable.
const indexEveryPacks = 64
