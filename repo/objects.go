package repo

import (
	"context"
	"errors"
	"fmt"

	"github.com/zeebo/blake3"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
)

// kindFiles maps sealed object kinds to where they are stored.
var kindFiles = map[crypt.ObjectKind]backend.FileType{
	crypt.KindIndex:     backend.Index,
	crypt.KindSnapshot:  backend.Snapshot,
	crypt.KindLock:      backend.Lock,
	crypt.KindPolicy:    backend.Policy,
	crypt.KindPin:       backend.Pin,
	crypt.KindCondemned: backend.Condemned,
}

func fileType(kind crypt.ObjectKind) (backend.FileType, error) {
	ft, ok := kindFiles[kind]
	if !ok {
		return "", fmt.Errorf("objects of kind %s are not stored as files", kind)
	}
	return ft, nil
}

// SaveObject seals plaintext as an object of kind in tier t and stores it
// under the BLAKE3 hash of its bytes, which it returns.
func (r *Repository) SaveObject(ctx context.Context, kind crypt.ObjectKind, t blob.Tier, plaintext []byte) (blob.ID, error) {
	ft, err := fileType(kind)
	if err != nil {
		return blob.ID{}, err
	}
	k, err := r.keys.Tier(t)
	if err != nil {
		return blob.ID{}, err
	}
	data := crypt.SealObject(k, kind, plaintext)
	id := blob.ID(blake3.Sum256(data))
	if err := r.be.Save(ctx, backend.Handle{Type: ft, Name: id.String()}, data); err != nil {
		return id, fmt.Errorf("saving %s: %w", kind, err)
	}
	return id, nil
}

// LoadObject loads an object, checks it against its name and opens it.
func (r *Repository) LoadObject(ctx context.Context, kind crypt.ObjectKind, id blob.ID) (blob.Tier, []byte, error) {
	ft, err := fileType(kind)
	if err != nil {
		return 0, nil, err
	}
	data, ok := r.objects.get(kind, id)
	if !ok {
		if data, err = r.loadFile(ctx, ft, id); err != nil {
			return 0, nil, err
		}
		if r.opts.KeepObjects && cached(kind) {
			r.objects.put(kind, id, data)
		}
	}
	t, plain, err := crypt.OpenObject(r.keys, kind, data)
	if err != nil && !errors.Is(err, crypt.ErrTierLocked) {
		return t, nil, fmt.Errorf("%w: %s/%s: %w", ErrCorrupt, ft, id, err)
	}
	return t, plain, err
}

// Unkeep drops the kept copy of an object (Options.KeepObjects), so the
// next load reads it from storage: a readability check that must see
// damage done after this process first loaded the object.
func (r *Repository) Unkeep(kind crypt.ObjectKind, id blob.ID) { r.objects.drop(kind, id) }

// ListObjects calls fn with the id of every stored object of kind.
func (r *Repository) ListObjects(ctx context.Context, kind crypt.ObjectKind, fn func(blob.ID) error) error {
	ft, err := fileType(kind)
	if err != nil {
		return err
	}
	return r.listIDs(ctx, ft, fn)
}

// RemoveObject deletes one stored object.
func (r *Repository) RemoveObject(ctx context.Context, kind crypt.ObjectKind, id blob.ID) error {
	ft, err := fileType(kind)
	if err != nil {
		return err
	}
	r.objects.drop(kind, id)
	return r.be.Remove(ctx, backend.Handle{Type: ft, Name: id.String()})
}

// listIDs lists the files of type ft, skipping names that are not ids.
func (r *Repository) listIDs(ctx context.Context, ft backend.FileType, fn func(blob.ID) error) error {
	return r.be.List(ctx, ft, func(fi backend.FileInfo) error {
		id, err := blob.ParseID(fi.Name)
		if err != nil {
			return nil
		}
		return fn(id)
	})
}

// loadFile loads a whole content-addressed file and checks its hash.
func (r *Repository) loadFile(ctx context.Context, ft backend.FileType, id blob.ID) ([]byte, error) {
	h := backend.Handle{Type: ft, Name: id.String()}
	data, err := r.be.Load(ctx, h, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", h, err)
	}
	if got := blob.ID(blake3.Sum256(data)); got != id {
		return nil, fmt.Errorf("%w: %s hashes to %s, not its name (damaged or renamed)", ErrCorrupt, h, got.Short())
	}
	return data, nil
}
