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
// to one of them at random (the first, from a random one, that no other
// blob is being written into), so the blobs of a file scatter over packs
// and pack sizes say little about chunk boundaries. A nil slot has no pack
// yet.
type packerSet struct {
	mu    sync.Mutex
	keys  *crypt.TierKeys
	packs []*openPack
}

// openPack is a pack being filled: streamed to a backend temp file where
// the backend takes them (backend.TempSaver), else built in memory.
//
// A blob is given a place in a pack under its pack set's lock (bytes and
// count grow there), and written into it under the pack's own lock, so
// the copy and the pack hash of one pack's blobs do not hold up the blobs
// going into the set's other packs, nor does a pack whose file writes
// wait for the disk. A pack taken out of its slot is finished only once
// the writes it was promised are done (adding).
type openPack struct {
	*pack.Writer
	temp backend.TempFile // nil for a pack in memory
	typ  blob.Type        // of its blobs, in a packer's pack
	// ids are the blobs added to it, in a packer's pack, appended under
	// mu: if the pack is lost they are dropped from the pending set
	// (lose), so a later save stores them again.
	ids []blob.ID

	bytes, count int            // sealed bytes and blobs promised to it; the pack set's lock held
	adding       sync.WaitGroup // writes promised and not yet done; added to under the pack set's lock
	mu           sync.Mutex     // serialises the writes into Writer
}

// fits reports whether a sealed blob of n bytes can join p, counting the
// blobs promised to it; the pack set's lock held.
func (p *openPack) fits(n int) bool {
	return p.FitsWith(p.bytes, p.count, n)
}

// finish waits for the writes promised to p, then finishes it like
// pack.Writer.Finish; p must be out of its slot.
func (p *openPack) finish() (data []byte, size int64, id blob.ID, entries []pack.Entry, err error) {
	p.adding.Wait()
	return p.Finish()
}

// newPack starts an empty pack for the tier of k.
func (r *Repository) newPack(k *crypt.TierKeys) (*openPack, error) {
	ts, ok := r.be.(backend.TempSaver)
	if !ok {
		return &openPack{Writer: pack.NewWriter(k, r.opts.PackSize)}, nil
	}
	f, err := ts.CreateTemp()
	if err != nil {
		return nil, err
	}
	return &openPack{Writer: pack.NewStreamWriter(k, r.opts.PackSize, f), temp: f}, nil
}

// discard drops a pack that will not be saved.
func (r *Repository) discard(p *openPack) {
	if p.temp != nil {
		r.be.(backend.TempSaver).DiscardTemp(p.temp)
	}
}

// pack seals one blob and adds it to a random open pack of its tier and
// type, uploading the pack when it reaches the target size.
func (r *Repository) pack(k *crypt.TierKeys, typ blob.Type, id blob.ID, data []byte) error {
	// Sealing is CPU work that takes three blob-sized buffers (compressed,
	// sealed, verified): more at once than there are CPUs only adds memory.
	r.seals <- struct{}{}
	sb, err := pack.SealBlob(k, typ, id, data, r.opts.Compress)
	<-r.seals
	if err != nil {
		return err
	}
	defer sb.Release()
	ps := r.packerSet(k, typ)
	ps.mu.Lock()
	// The slot is the first, from a random one, whose pack no other blob
	// is being written into: a pack whose file writes wait for the disk
	// then holds up only the blobs already promised to it. An empty slot
	// is taken like a full one: a file's consecutive chunks scatter over
	// the slots' packs even from a single writer, so that pack sizes do
	// not reveal where the chunker cut (docs/format.md, random pack
	// assignment). Filling one pack before starting another would undo
	// that.
	start := rand.IntN(len(ps.packs))
	i, locked := start, false
	for j := range len(ps.packs) {
		n := (start + j) % len(ps.packs)
		if p := ps.packs[n]; p == nil || p.mu.TryLock() {
			i, locked = n, p != nil
			break
		}
	}
	var full *openPack
	var seq uint64
	if p := ps.packs[i]; p != nil && !p.fits(len(sb.Data)) {
		if locked {
			p.mu.Unlock()
			locked = false
		}
		full, ps.packs[i] = p, nil
		seq = r.handOff()
	}
	if ps.packs[i] == nil {
		if ps.packs[i], err = r.newPack(k); err != nil {
			ps.mu.Unlock()
			if full != nil {
				r.upload(k.Tier, full, seq)
			}
			return fmt.Errorf("starting a pack: %w", err)
		}
		ps.packs[i].typ = typ
	}
	p := ps.packs[i]
	p.bytes += len(sb.Data)
	p.count++
	p.adding.Add(1)
	ps.mu.Unlock()
	if !locked {
		p.mu.Lock()
	}
	err = p.Add(sb)
	if err == nil {
		p.ids = append(p.ids, id)
	}
	p.mu.Unlock()
	p.adding.Done()
	if full != nil {
		r.upload(k.Tier, full, seq)
	}
	if err != nil { // the pack's file failed: its blobs are lost
		// Whoever takes it out of its slot first discards it, once the
		// other writes promised to it are done (they fail too); a pack
		// already handed off fails its upload's Finish and is discarded
		// there.
		ps.mu.Lock()
		lost := ps.packs[i] == p
		if lost {
			ps.packs[i] = nil
		}
		ps.mu.Unlock()
		err = fmt.Errorf("writing a pack: %w", err)
		if lost {
			p.adding.Wait()
			r.discard(p)
			r.lose(k.Tier, p, err)
		}
		return err
	}
	return nil
}

func (r *Repository) packerSet(k *crypt.TierKeys, typ blob.Type) *packerSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := packerKey{k.Tier, typ}
	ps := r.packers[key]
	if ps == nil {
		ps = &packerSet{keys: k, packs: make([]*openPack, r.opts.Packers)}
		r.packers[key] = ps
	}
	return ps
}

// handOff numbers a full pack just taken out of its slot and counts it as
// in flight from then on. It must be called with the pack set's lock held:
// a Flush that finds the slot empty must also find the pack in flight, or
// it could return before a pack holding blobs saved before it is stored
// (captures running side by side in `lifeboat serve` share packs).
func (r *Repository) handOff() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uploadSeq++
	r.inflight[r.uploadSeq] = true
	return r.uploadSeq
}

// upload finishes p, handed off as seq, and saves it in the background, at
// most Options.Uploads at a time; it blocks while that many are in flight.
// Uploads run under the repository's own context, not a caller's, so a
// caller that gives up cannot drop a pack holding other callers' blobs.
// A failed upload loses the pack (lose): the next Flush reports it, and
// so does the Commit of every session that ran while it failed.
func (r *Repository) upload(t blob.Tier, p *openPack, seq uint64) {
	r.uploadSlot(t, p, seq, true)
}

// uploadSlot is upload; without slot, the upload does not wait for (nor
// take) one of the Options.Uploads slots: a Flush uploads the packs it
// takes out of their slots all at once (their memory is held already),
// since nothing is left to overlap with waiting for them.
func (r *Repository) uploadSlot(t blob.Tier, p *openPack, seq uint64, slot bool) {
	if r.testBeforeUpload != nil {
		r.testBeforeUpload()
	}
	if slot {
		r.uploads <- struct{}{}
	}
	start := r.startNow() // before the pack can be stored: see flush.go
	go func() {
		r.savePack(r.bg, t, p, start)
		if slot {
			<-r.uploads
		}
		r.mu.Lock()
		delete(r.inflight, seq)
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
}

// savePack writes one pack and records its blobs as uploaded, or, if it
// cannot be stored, as lost. Once enough packs wait for an index object,
// it writes one; if that fails, the packs stay queued for the next
// (Flush writes them or reports why not).
func (r *Repository) savePack(ctx context.Context, t blob.Tier, p *openPack, start startTime) {
	size, id, entries, err := r.storePack(ctx, p)
	if err != nil {
		r.lose(t, p, err)
		return
	}
	info := &index.PackInfo{ID: id, Size: uint32(size), Entries: entries}
	r.mu.Lock()
	r.uploadStart[id] = start
	for i, e := range entries {
		if p := r.pending[pendingKey{t, e.Type, e.ID}]; p != nil {
			p.pack, p.entry = info, int32(i)
		}
	}
	r.unindexed[t] = append(r.unindexed[t], *info)
	n := 0
	for _, p := range r.unindexed[t] {
		n += len(p.Entries)
	}
	due := n >= indexEveryEntries || len(r.unindexed[t]) >= indexEveryPacks
	r.mu.Unlock()
	if due {
		_ = r.writeIndex(ctx, t)
	}
}

// storePack finishes p and stores it: its temp file through SaveTemp, or
// its bytes through Save. Either way p is consumed.
func (r *Repository) storePack(ctx context.Context, p *openPack) (size int64, id blob.ID, entries []pack.Entry, err error) {
	data, size, id, entries, err := p.finish()
	if err != nil {
		r.discard(p)
		return 0, id, nil, fmt.Errorf("writing a pack: %w", err)
	}
	h := backend.Handle{Type: backend.Pack, Name: id.String()}
	if p.temp != nil {
		err = r.be.(backend.TempSaver).SaveTemp(ctx, h, p.temp)
	} else {
		err = r.be.Save(ctx, h, data)
		pack.ReleasePack(data)
	}
	if err != nil {
		return 0, id, nil, fmt.Errorf("saving %s: %w", h, err)
	}
	return size, id, entries, nil
}

// waitUploads returns once every upload started before the call is done.
// Uploads started later do not hold it up.
func (r *Repository) waitUploads() {
	r.mu.Lock()
	defer r.mu.Unlock()
	target := r.uploadSeq
	for r.uploadsBefore(target) {
		if r.testFlushWaits != nil {
			r.testFlushWaits()
		}
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

// indexEveryEntries is how many uploaded blobs make an index object due
// too: a capture of small files puts about 30,000 in each pack, and until
// indexed each waits in the pending set, and then for the final flush.
const indexEveryEntries = 16384
