package repo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strings"
	"time"

	"github.com/zeebo/blake3"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
)

// KeyInfo describes one key file for listings.
type KeyInfo struct {
	ID       blob.ID     `json:"id"`
	Current  bool        `json:"current"`
	Created  time.Time   `json:"created"`
	Hostname string      `json:"hostname,omitempty"`
	Username string      `json:"username,omitempty"`
	Tiers    []blob.Tier `json:"tiers"`
	Error    string      `json:"error,omitempty"` // set when the file is not a readable key file
}

func keyMeta(now time.Time) crypt.KeyFileMeta {
	m := crypt.KeyFileMeta{Created: now}
	m.Hostname, _ = os.Hostname()
	if u, err := user.Current(); err == nil {
		m.Username = u.Username
	}
	return m
}

// saveKeyFile wraps keys for tiers under password and stores the key file.
func saveKeyFile(ctx context.Context, be backend.Backend, keys *crypt.MasterKeys, tiers []blob.Tier, password []byte, kdf crypt.KDFParams, repoID blob.ID, now time.Time) (blob.ID, error) {
	data, err := crypt.NewKeyFile(keys, tiers, password, kdf, repoID, keyMeta(now))
	if err != nil {
		return blob.ID{}, err
	}
	id := blob.ID(blake3.Sum256(data))
	if err := be.Save(ctx, backend.Handle{Type: backend.Key, Name: id.String()}, data); err != nil {
		return blob.ID{}, fmt.Errorf("saving key file: %w", err)
	}
	return id, nil
}

// loadKeyFile loads and parses one key file, checking it against its name.
func loadKeyFile(ctx context.Context, be backend.Backend, name string) (*crypt.KeyFile, blob.ID, error) {
	id, err := blob.ParseID(name)
	if err != nil {
		return nil, id, fmt.Errorf("%w: key file %q has a malformed name", crypt.ErrNotKeyFile, name)
	}
	data, err := be.Load(ctx, backend.Handle{Type: backend.Key, Name: name}, 0, 0)
	if err != nil {
		return nil, id, err
	}
	if blob.ID(blake3.Sum256(data)) != id {
		return nil, id, fmt.Errorf("%w: key file keys/%s does not hash to its name", ErrCorrupt, name)
	}
	kf, err := crypt.DecodeKeyFile(data)
	if err != nil {
		return nil, id, fmt.Errorf("keys/%s: %w", name, err)
	}
	return kf, id, nil
}

// unlock tries every key file (or those whose id starts with hint) with
// password and returns the first master keys that open.
func unlock(ctx context.Context, be backend.Backend, repoID blob.ID, password []byte, hint string) (*crypt.MasterKeys, blob.ID, error) {
	var names []string
	err := be.List(ctx, backend.Key, func(fi backend.FileInfo) error {
		if strings.HasPrefix(fi.Name, hint) {
			names = append(names, fi.Name)
		}
		return nil
	})
	if err != nil {
		return nil, blob.ID{}, fmt.Errorf("listing keys: %w", err)
	}
	sort.Strings(names)
	var bad []error
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, blob.ID{}, err
		}
		kf, id, err := loadKeyFile(ctx, be, name)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		keys, err := kf.Open(password, repoID)
		if errors.Is(err, crypt.ErrWrongPassword) {
			continue
		}
		if err != nil {
			bad = append(bad, fmt.Errorf("keys/%s: %w", name, err))
			continue
		}
		return keys, id, nil
	}
	if len(names) > 0 && len(bad) == len(names) {
		return nil, blob.ID{}, fmt.Errorf("%w: %w", ErrNoUsableKey, errors.Join(bad...))
	}
	if len(names) == 0 {
		return nil, blob.ID{}, fmt.Errorf("%w in %s (key hint %q)", ErrNoUsableKey, be.Location(), hint)
	}
	return nil, blob.ID{}, fmt.Errorf("%w (tried %d key files)", crypt.ErrWrongPassword, len(names)-len(bad))
}

// Keys lists the repository's key files.
func (r *Repository) Keys(ctx context.Context) ([]KeyInfo, error) {
	var out []KeyInfo
	err := r.be.List(ctx, backend.Key, func(fi backend.FileInfo) error {
		kf, id, err := loadKeyFile(ctx, r.be, fi.Name)
		if errors.Is(err, crypt.ErrNotKeyFile) || errors.Is(err, ErrCorrupt) {
			out = append(out, KeyInfo{ID: id, Tiers: []blob.Tier{}, Error: err.Error()})
			return nil
		}
		if err != nil {
			return err
		}
		m := kf.Meta()
		out = append(out, KeyInfo{ID: id, Current: id == r.keyID, Created: m.Created, Hostname: m.Hostname, Username: m.Username, Tiers: m.Tiers})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, err
}

// KeyID is the id of the key file this repository was opened with.
func (r *Repository) KeyID() blob.ID { return r.keyID }

// Tiers lists the tiers the open key unlocks.
func (r *Repository) Tiers() []blob.Tier { return r.keys.Tiers() }

// AddKey stores a new key file wrapping the named tiers under password.
// The open key must itself unlock every tier it hands on.
func (r *Repository) AddKey(ctx context.Context, password []byte, tiers []blob.Tier, kdf crypt.KDFParams) (blob.ID, error) {
	for _, t := range tiers {
		if !r.keys.Has(t) {
			return blob.ID{}, fmt.Errorf("the key in use does not unlock the %s tier, so it cannot make a key that does: %w", t, crypt.ErrTierLocked)
		}
	}
	return saveKeyFile(ctx, r.be, r.keys, tiers, password, kdf, r.cfg.ID, r.now())
}

// FindKey resolves a key id or unique prefix of at least 4 hex characters.
func (r *Repository) FindKey(ctx context.Context, prefix string) (KeyInfo, error) {
	keys, err := r.Keys(ctx)
	if err != nil {
		return KeyInfo{}, err
	}
	var found []KeyInfo
	for _, k := range keys {
		if len(prefix) >= 4 && strings.HasPrefix(k.ID.String(), strings.ToLower(prefix)) {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return KeyInfo{}, fmt.Errorf("%w: %q (list them with `lifeboat key list`; give at least 4 hex characters)", ErrKeyNotFound, prefix)
	case 1:
		return found[0], nil
	}
	return KeyInfo{}, fmt.Errorf("%w: %q; give more characters", ErrKeyAmbiguous, prefix)
}

// RemoveKey deletes a key file. It refuses the key in use, the last key,
// and the last key that unlocks the sensitive tier (whose data would
// otherwise become unreadable for good).
func (r *Repository) RemoveKey(ctx context.Context, id blob.ID) error {
	keys, err := r.Keys(ctx)
	if err != nil {
		return err
	}
	var target *KeyInfo
	readable, sensitive := 0, 0
	for i, k := range keys {
		if k.ID == id {
			target = &keys[i]
		}
		if k.Error == "" {
			readable++
		}
		if hasTier(k.Tiers, blob.Sensitive) {
			sensitive++
		}
	}
	switch {
	case target == nil:
		return fmt.Errorf("%w: %s", ErrKeyNotFound, id.Short())
	case target.Error != "": // not a key: always removable
	case readable == 1:
		return fmt.Errorf("%w: %s is the only key; add another first", ErrLastKey, id.Short())
	case id == r.keyID:
		return fmt.Errorf("%w: %s; open the repository with another key to remove it (or use `lifeboat key passwd`)", ErrKeyInUse, id.Short())
	case hasTier(target.Tiers, blob.Sensitive) && sensitive == 1:
		return fmt.Errorf("%w: %s is the only key that unlocks the sensitive tier; removing it would make that data unreadable", ErrLastKey, id.Short())
	}
	return r.be.Remove(ctx, backend.Handle{Type: backend.Key, Name: id.String()})
}

// ChangePassword replaces the key in use with a new key file of the same
// tiers under a new password: the new file is stored before the old one is
// removed, so a crash leaves at least one working key.
func (r *Repository) ChangePassword(ctx context.Context, password []byte, kdf crypt.KDFParams) (blob.ID, error) {
	id, err := saveKeyFile(ctx, r.be, r.keys, r.keys.Tiers(), password, kdf, r.cfg.ID, r.now())
	if err != nil {
		return blob.ID{}, err
	}
	if err := r.be.Remove(ctx, backend.Handle{Type: backend.Key, Name: r.keyID.String()}); err != nil {
		return id, fmt.Errorf("new key %s saved, but removing the old key %s failed (remove it with `lifeboat key remove`): %w", id.Short(), r.keyID.Short(), err)
	}
	r.keyID = id
	return id, nil
}

func hasTier(ts []blob.Tier, t blob.Tier) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
