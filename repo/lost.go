package repo

import (
	"errors"
	"fmt"

	"lifeboat/blob"
)

// ErrPackLost: a pack holding blobs saved in this process could not be
// stored, so those blobs are lost. The repository goes on: they are
// dropped from the pending set, never indexed, and saved again by the next
// save of the same content. A Flush reports the loss once; the Commit of
// every session that ran while it happened refuses its snapshot (packs
// are shared, so any of them may have saved or reused a lost blob).
// Running the capture again is safe. The error also wraps the storage's
// own (backend.ErrUnavailable, backend.ErrNoSpace, ...).
var ErrPackLost = errors.New("a pack upload failed")

// lostPack is one pack that could not be stored: the seq-th loss.
type lostPack struct {
	seq uint64
	err error
}

// lostKept bounds the losses remembered for error messages; the count of
// losses (Repository.lostSeq) is exact.
const lostKept = 16

// lose records that pack p of tier t, out of its slot and consumed, could
// not be stored: its blobs leave the pending set, so that no later save or
// lookup takes them for stored, and sessions and Flush see the loss.
func (r *Repository) lose(t blob.Tier, p *openPack, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range p.ids {
		// A blob is in one pack at a time: while it is in p, its pending
		// entry is p's (a blob whose save failed was never added).
		key := pendingKey{t, p.typ, id}
		if pb := r.pending[key]; pb != nil && pb.pack == nil {
			delete(r.pending, key)
		}
	}
	r.lostSeq++
	r.lost = append(r.lost, lostPack{r.lostSeq, err})
	if len(r.lost) > lostKept {
		r.lost = r.lost[len(r.lost)-lostKept:]
	}
}

// lostSince returns an error wrapping ErrPackLost and the first kept
// loss after the mark-th, or nil when there was none. r.mu held.
func (r *Repository) lostSince(mark uint64) error {
	if r.lostSeq <= mark {
		return nil
	}
	first := r.lost[0]
	for _, l := range r.lost {
		if l.seq > mark {
			first = l
			break
		}
	}
	if n := r.lostSeq - mark; n > 1 {
		return fmt.Errorf("%w (%d packs lost): %w", ErrPackLost, n, first.err)
	}
	return fmt.Errorf("%w: %w", ErrPackLost, first.err)
}

// unreportedLoss returns the losses no Flush has reported yet, and counts
// them as reported. r.mu held.
func (r *Repository) unreportedLoss() error {
	err := r.lostSince(r.reported)
	r.reported = r.lostSeq
	return err
}
