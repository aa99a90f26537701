package repo

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/pack"
)

type pendingKey struct {
	tier blob.Tier
	typ  blob.Type
	id   blob.ID
}

// pendingBlob is a blob saved this session and not yet in the local index.
// saving is set until the blob sits in an open pack (or its save failed,
// with err set); ready is made only when another save of the same blob
// waits for that, and closed then. pack and entry locate the blob once its
// pack is uploaded. A capture of many small files has about 100,000 of
// these at once, hence no channel for each and no copy of the pack entry.
type pendingBlob struct {
	ready  chan struct{}
	err    error
	pack   *index.PackInfo
	entry  int32 // in pack.Entries
	saving bool
}

// SaveBlob stores data as a blob of type typ in tier t, unless a blob with
// the same id is already stored or pending. It returns the blob's id and
// whether it was already known. When it returns, the blob is in an open
// pack or stored; it is durable once a later Flush returns nil (and, for
// a capture, once its session commits: a pack lost meanwhile is reported
// there; see ErrPackLost).
// SaveBlob keeps no reference to data: the caller may reuse it at once.
func (r *Repository) SaveBlob(ctx context.Context, t blob.Tier, typ blob.Type, data []byte) (blob.ID, bool, error) {
	k, err := r.keys.Tier(t)
	if err != nil {
		return blob.ID{}, false, err
	}
	if !typ.Valid() {
		return blob.ID{}, false, fmt.Errorf("invalid blob type %d", typ)
	}
	id := k.BlobID(data)
	key := pendingKey{t, typ, id}
	for {
		if err := ctx.Err(); err != nil {
			return id, false, err
		}
		r.mu.Lock()
		if err := r.usable(); err != nil {
			r.mu.Unlock()
			return id, false, err
		}
		p, ok := r.pending[key]
		if !ok {
			p = &pendingBlob{saving: true}
			r.pending[key] = p
			r.busy++
			r.mu.Unlock()
			known, err := r.saveNew(ctx, k, typ, id, data)
			r.mu.Lock()
			if err != nil || known {
				delete(r.pending, key)
				p.err = err
			}
			p.saving = false
			if p.ready != nil {
				close(p.ready)
			}
			r.busy--
			r.cond.Broadcast()
			r.mu.Unlock()
			return id, known, err
		}
		if !p.saving { // saved: a failed save leaves pending at once
			r.mu.Unlock()
			return id, true, nil
		}
		// Another goroutine is saving the same blob: it is known once that
		// save has put it in a pack; if that save failed, try ourselves.
		if p.ready == nil {
			p.ready = make(chan struct{})
		}
		ready := p.ready
		r.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return id, false, ctx.Err()
		}
		if p.err == nil {
			return id, true, nil
		}
	}
}

// saveNew looks the blob up in the local index and packs it if it is new.
// A blob whose every place is in a pack known to be gone or condemned
// counts as new (index.DB.LookupUsable): it is stored again.
func (r *Repository) saveNew(ctx context.Context, k *crypt.TierKeys, typ blob.Type, id blob.ID, data []byte) (bool, error) {
	_, known, err := r.idx.LookupUsable(k.Tier, typ, id)
	if err != nil || known {
		return known, err
	}
	return false, r.pack(k, typ, id, data)
}

var errNoIndex = errors.New("repository was opened without its index (Options.NoIndexDB): blobs cannot be saved or loaded")

// usable reports a closed repository or one opened without its index. A
// lost pack does not make it unusable (ErrPackLost). r.mu held.
func (r *Repository) usable() error {
	if r.closing {
		return ErrClosed
	}
	if r.idx == nil {
		return errNoIndex
	}
	return nil
}

// LookupBlob returns where a blob is stored: pending uploads of this
// session first, then the local index. A blob still in an open pack is an
// error unless the index knows a stored copy of it (another process
// stored it first, and an index sync brought it here while this session
// saved its own): that copy is returned.
func (r *Repository) LookupBlob(t blob.Tier, typ blob.Type, id blob.ID) (index.Location, bool, error) {
	loc, ok, perr := r.lookupPending(t, typ, id)
	if ok {
		return loc, true, nil
	}
	if r.idx == nil {
		return index.Location{}, false, cmp.Or(perr, errNoIndex)
	}
	loc, ok, err := r.idx.Lookup(t, typ, id)
	if ok || err != nil {
		return loc, ok, err
	}
	return index.Location{}, false, perr
}

// LookupBlobs looks many blobs up like LookupBlob, the local index in
// one read transaction, and calls fn once for each, with its index in
// ids, in no particular order. A blob still in an open pack is an error,
// as for LookupBlob: a *LookupError naming it.
func (r *Repository) LookupBlobs(t blob.Tier, typ blob.Type, ids []blob.ID, fn func(i int, loc index.Location, ok bool) error) error {
	if r.idx == nil {
		return errNoIndex
	}
	var missed []int
	err := r.idx.LookupMany(t, typ, ids, func(i int, loc index.Location, ok bool) error {
		if !ok {
			missed = append(missed, i)
			return nil
		}
		return fn(i, loc, ok)
	})
	if err != nil {
		return err
	}
	// Not indexed when the transaction began: saved this session (pending),
	// indexed since, or not stored. LookupBlob tells, pending set first.
	for _, i := range missed {
		loc, ok, err := r.LookupBlob(t, typ, ids[i])
		if err != nil {
			return &LookupError{Index: i, Err: err}
		}
		if err := fn(i, loc, ok); err != nil {
			return err
		}
	}
	return nil
}

// LookupError is a blob LookupBlobs could not look up: ids[Index].
type LookupError struct {
	Index int
	Err   error
}

func (e *LookupError) Error() string { return e.Err.Error() }
func (e *LookupError) Unwrap() error { return e.Err }

// lookupPending finds a blob saved this session whose pack is uploaded
// but not yet indexed; a blob still in an open pack is an error.
func (r *Repository) lookupPending(t blob.Tier, typ blob.Type, id blob.ID) (index.Location, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pending[pendingKey{t, typ, id}]
	switch {
	case !ok:
		return index.Location{}, false, nil
	case p.pack == nil:
		return index.Location{}, false, fmt.Errorf("blob %s is still in an open pack: call Flush before loading it", id.Short())
	}
	return index.Location{Pack: p.pack.ID, Entry: p.pack.Entries[p.entry]}, true, nil
}

// LoadBlob loads, decrypts and verifies one blob, reusing buf when it can.
// When its pack is missing or the blob there does not verify, the other
// places the index knows for it (a blob stored twice, or a place named by
// a stale index object) are tried in turn; the error, if all fail, is the
// first place's.
func (r *Repository) LoadBlob(ctx context.Context, t blob.Tier, typ blob.Type, id blob.ID, buf []byte) ([]byte, error) {
	k, err := r.keys.Tier(t)
	if err != nil {
		return nil, err
	}
	loc, ok, err := r.LookupBlob(t, typ, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s blob %s in the %s tier", ErrBlobNotFound, typ, id, t)
	}
	plain, err := r.loadAt(ctx, k, loc, buf)
	if err == nil || r.idx == nil || !(errors.Is(err, ErrPackMissing) || errors.Is(err, ErrCorrupt)) {
		return plain, err
	}
	locs, lerr := r.idx.LookupAll(t, typ, id)
	if lerr != nil {
		return nil, err
	}
	tried := 0
	for _, l := range locs {
		if l == loc {
			continue
		}
		tried++
		plain, lerr := r.loadAt(ctx, k, l, buf)
		if lerr == nil {
			return plain, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
	}
	if tried > 0 {
		err = fmt.Errorf("%w (the index knows %d other places of blob %s; none could be read either)", err, tried, id.Short())
	}
	return nil, err
}

// loadAt loads, decrypts and verifies the blob at loc.
func (r *Repository) loadAt(ctx context.Context, k *crypt.TierKeys, loc index.Location, buf []byte) ([]byte, error) {
	id := loc.ID
	h := backend.Handle{Type: backend.Pack, Name: loc.Pack.String()}
	sealed, err := r.be.Load(ctx, h, int64(loc.Offset), int(loc.Length))
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return nil, fmt.Errorf("%w: %s holds blob %s; run `lifeboat repair index` and `lifeboat check`", ErrPackMissing, h, id.Short())
	case errors.Is(err, backend.ErrShortRead):
		return nil, fmt.Errorf("%w: %s is truncated (blob %s lies past its end)", ErrCorrupt, h, id.Short())
	case err != nil:
		return nil, err
	}
	plain, err := pack.OpenVerified(k, loc.Entry, sealed, buf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, h, err)
	}
	return plain, nil
}

// PackStored and ListPacks make indexSource an index.PackSource: Sync asks
// which packs of the index objects it applies are stored, so that a place
// in a pack that is gone (a stale index object put back) never takes a
// blob over from the pack that holds it.
func (s indexSource) PackStored(ctx context.Context, id blob.ID) (bool, error) {
	_, err := s.r.be.Stat(ctx, backend.Handle{Type: backend.Pack, Name: id.String()})
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

func (s indexSource) ListPacks(ctx context.Context, fn func(id blob.ID) error) error {
	return s.r.listIDs(ctx, backend.Pack, fn)
}
