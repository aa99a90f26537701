package repo

import (
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

// pendingBlob is a blob saved this session. loc is set once its pack is
// uploaded; until then it lives only in a packer.
type pendingBlob struct {
	loc      index.Location
	uploaded bool
}

// SaveBlob stores data as a blob of type typ in tier t, unless a blob with
// the same id is already stored or pending. It returns the blob's id and
// whether it was already known. The blob is durable after Flush.
func (r *Repository) SaveBlob(ctx context.Context, t blob.Tier, typ blob.Type, data []byte) (blob.ID, bool, error) {
	k, err := r.keys.Tier(t)
	if err != nil {
		return blob.ID{}, false, err
	}
	if !typ.Valid() {
		return blob.ID{}, false, fmt.Errorf("invalid blob type %d", typ)
	}
	if err := ctx.Err(); err != nil {
		return blob.ID{}, false, err
	}
	id := k.BlobID(data)
	key := pendingKey{t, typ, id}

	r.mu.Lock()
	if err := r.usable(); err != nil {
		r.mu.Unlock()
		return id, false, err
	}
	if r.idx == nil {
		r.mu.Unlock()
		return id, false, errNoIndex
	}
	if _, ok := r.pending[key]; ok {
		r.mu.Unlock()
		return id, true, nil
	}
	r.pending[key] = &pendingBlob{} // claim it before the slow part
	r.mu.Unlock()

	_, known, err := r.idx.Lookup(t, typ, id)
	if err == nil && !known {
		err = r.pack(ctx, k, typ, id, data)
	}
	if err != nil || known {
		r.mu.Lock()
		delete(r.pending, key)
		r.mu.Unlock()
	}
	return id, known, err
}

var errNoIndex = errors.New("repository was opened without its index (Options.NoIndexDB): blobs cannot be saved or loaded")

// usable reports a closed repository or an earlier upload failure. r.mu held.
func (r *Repository) usable() error {
	if r.closed {
		return ErrClosed
	}
	if r.err != nil {
		return fmt.Errorf("an earlier pack upload failed: %w", r.err)
	}
	return nil
}

// LookupBlob returns where a blob is stored: pending uploads of this
// session first, then the local index.
func (r *Repository) LookupBlob(t blob.Tier, typ blob.Type, id blob.ID) (index.Location, bool, error) {
	r.mu.Lock()
	p, ok := r.pending[pendingKey{t, typ, id}]
	if ok && p.uploaded {
		loc := p.loc
		r.mu.Unlock()
		return loc, true, nil
	}
	r.mu.Unlock()
	if ok {
		return index.Location{}, false, fmt.Errorf("blob %s is still in an open pack: call Flush before loading it", id.Short())
	}
	if r.idx == nil {
		return index.Location{}, false, errNoIndex
	}
	return r.idx.Lookup(t, typ, id)
}

// LoadBlob loads, decrypts and verifies one blob, reusing buf when it can.
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
	plain, err := openBlob(k, loc, sealed, buf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, h, err)
	}
	return plain, nil
}

// openBlob opens a sealed blob and checks it hashes to its id.
func openBlob(k *crypt.TierKeys, loc index.Location, sealed, buf []byte) ([]byte, error) {
	plain, err := pack.OpenBlob(k, loc.Entry, sealed, buf)
	if err != nil {
		return nil, err
	}
	if k.BlobID(plain) != loc.ID {
		return nil, fmt.Errorf("blob %s: %w (plaintext does not hash to its id)", loc.ID.Short(), crypt.ErrAuth)
	}
	return plain, nil
}
