package repo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	Error    string      `json:"error,omitempty"` // set when the file is not a readable key file, or not tried (beyond the KDF bounds)

	aboveBounds bool // a key file whose argon2id cost is beyond the bounds (Error says so): tried only when named
}

func keyMeta(now time.Time) crypt.KeyFileMeta {
	m := crypt.KeyFileMeta{Created: now}
	m.Hostname, _ = os.Hostname()
	if u, err := user.Current(); err == nil {
		m.Username = u.Username
	}
	return m
}

// saveKeyFile wraps keys for tiers under password and stores the key
// file; cache, unless nil, keeps its key-encryption key.
func saveKeyFile(ctx context.Context, be backend.Backend, keys *crypt.MasterKeys, tiers []blob.Tier, password []byte, kdf crypt.KDFParams, repoID blob.ID, now time.Time, cache crypt.KEKCache) (blob.ID, error) {
	data, err := crypt.NewKeyFile(keys, tiers, password, kdf, repoID, keyMeta(now), cache)
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
// Its errors do not name the file: callers do.
func loadKeyFile(ctx context.Context, be backend.Backend, name string) (*crypt.KeyFile, blob.ID, error) {
	id, err := blob.ParseID(name)
	if err != nil {
		return nil, id, fmt.Errorf("%w: its name is not a key file id", crypt.ErrNotKeyFile)
	}
	data, err := be.Load(ctx, backend.Handle{Type: backend.Key, Name: name}, 0, 0)
	if err != nil {
		return nil, id, err
	}
	if blob.ID(blake3.Sum256(data)) != id {
		return nil, id, fmt.Errorf("%w: the key file does not hash to its name", ErrCorrupt)
	}
	kf, err := crypt.DecodeKeyFile(data)
	if err != nil {
		return nil, id, err
	}
	return kf, id, nil
}

// keyCandidate is a key file unlock may derive, kept without its bytes
// (they are loaded again to be opened), so a repository full of large
// forged key files costs memory for their names only.
type keyCandidate struct {
	name    string
	cost    uint64 // argon2id passes × KiB
	created time.Time
	kf      *crypt.KeyFile
	id      blob.ID
}

// unusableKey is a key file unlock did not try, and why.
type unusableKey struct {
	name string
	err  error
}

// Error names the key file and says what to do about it.
func (u unusableKey) Error() string {
	id, bad := blob.ParseID(u.name)
	switch {
	case bad != nil:
		return fmt.Sprintf("keys/%s: %v; if you did not put it there, delete it from the storage", u.name, u.err)
	case errors.Is(u.err, crypt.ErrKDFCost):
		return fmt.Sprintf("key file %s refused before deriving its key: %v. If you made it with an older lifeboat, "+
			"open with --key-hint %s and give it a new password with `lifeboat key passwd`; "+
			"if you did not make it, remove it with `lifeboat key remove %s`", id.Short(), u.err, id, id.Short())
	case errors.Is(u.err, crypt.ErrNotKeyFile), errors.Is(u.err, ErrCorrupt):
		return fmt.Sprintf("key file %s is not usable: %v; if you did not make it, remove it with `lifeboat key remove %s`", id.Short(), u.err, id.Short())
	}
	return fmt.Sprintf("key file %s could not be read: %v", id.Short(), u.err)
}

func (u unusableKey) Unwrap() error { return u.err }

// unlock opens the first key file that password unlocks. It considers
// every key file, or with a hint those whose id starts with it. Before it
// derives anything it decodes them all and sets aside those it will not
// try: unreadable ones, and those whose argon2id cost is beyond the bounds
// (unless the hint names that key file alone: a key an older lifeboat
// made). Each one set aside is passed as a warning (WithWarn) that names
// it and what to do. It then tries the rest cheapest first, newest first among equal
// costs, so a forged key file dearer than the user's is never derived
// before it, and each costs at most one derivation within the bounds.
func unlock(ctx context.Context, be backend.Backend, repoID blob.ID, password []byte, hint string, cache crypt.KEKCache) (*crypt.MasterKeys, blob.ID, error) {
	var names []string
	err := be.List(ctx, backend.Key, func(fi backend.FileInfo) error {
		if strings.HasPrefix(fi.Name, hint) {
			names = append(names, fi.Name)
		}
		return nil
	})
	if errors.Is(err, fs.ErrPermission) { // like a refused config: the repository is there
		return nil, blob.ID{}, fmt.Errorf("%w at %s: listing its key files (keys/): %w; run lifeboat as a user that may read the repository (its owner), or give this user read and search access to keys/ and the files in it",
			ErrAccessDenied, be.Location(), err)
	}
	if err != nil {
		return nil, blob.ID{}, fmt.Errorf("listing keys: %w", err)
	}
	if len(names) == 0 {
		return nil, blob.ID{}, fmt.Errorf("%w in %s (key hint %q)", ErrNoUsableKey, be.Location(), hint)
	}
	named := hint != "" && len(names) == 1
	var cands []keyCandidate
	var unusable []error
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, blob.ID{}, err
		}
		kf, id, err := loadKeyFile(ctx, be, name)
		if err == nil && !named {
			err = kf.KDF.Validate()
		}
		if err != nil {
			unusable = append(unusable, unusableKey{name, err})
			continue
		}
		cands = append(cands, keyCandidate{name, kf.KDF.Cost(), kf.Created, kf, id})
	}
	if len(cands) == 0 {
		return nil, blob.ID{}, fmt.Errorf("%w: %w", ErrNoUsableKey, errors.Join(unusable...))
	}
	for _, u := range unusable {
		Warnf(ctx, "%s", u.Error())
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.cost != b.cost {
			return a.cost < b.cost
		}
		if !a.created.Equal(b.created) {
			return a.created.After(b.created)
		}
		return a.name < b.name
	})
	// A key the cache holds for this password opens its key file without
	// a derivation, wherever that key file sorts.
	for _, c := range cands {
		if c.kf.KDF.Validate() != nil {
			continue // beyond the bounds: derived only as named, never cached
		}
		if keys, ok := c.kf.OpenFromCache(password, repoID, cache); ok {
			return keys, c.id, nil
		}
	}
	tried := 0
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return nil, blob.ID{}, err
		}
		var keys *crypt.MasterKeys
		var err error
		if named && c.kf.KDF.Validate() != nil {
			keys, err = c.kf.OpenAboveBounds(password, repoID)
		} else {
			keys, err = c.kf.OpenCached(password, repoID, cache)
		}
		if errors.Is(err, crypt.ErrWrongPassword) {
			tried++
			continue
		}
		if err != nil {
			unusable = append(unusable, unusableKey{c.name, err})
			continue
		}
		return keys, c.id, nil
	}
	if tried == 0 {
		return nil, blob.ID{}, fmt.Errorf("%w: %w", ErrNoUsableKey, errors.Join(unusable...))
	}
	if len(unusable) > 0 {
		return nil, blob.ID{}, fmt.Errorf("%w (tried %s; %d not tried or not usable, see the warnings)", crypt.ErrWrongPassword, keyFiles(tried), len(unusable))
	}
	return nil, blob.ID{}, fmt.Errorf("%w (tried %s)", crypt.ErrWrongPassword, keyFiles(tried))
}

// keyFiles is "1 key file" or "N key files".
func keyFiles(n int) string {
	if n == 1 {
		return "1 key file"
	}
	return fmt.Sprintf("%d key files", n)
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
		k := KeyInfo{ID: id, Current: id == r.keyID, Created: m.Created, Hostname: m.Hostname, Username: m.Username, Tiers: m.Tiers}
		if err := kf.KDF.Validate(); err != nil {
			k.Error, k.aboveBounds = err.Error()+"; tried only when --key-hint names this key file alone", true
		}
		out = append(out, k)
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
	return saveKeyFile(ctx, r.be, r.keys, tiers, password, kdf, r.cfg.ID, r.now(), nil)
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
		if k.Error == "" || k.aboveBounds {
			readable++
		}
		if hasTier(k.Tiers, blob.Sensitive) {
			sensitive++
		}
	}
	switch {
	case target == nil:
		return fmt.Errorf("%w: %s", ErrKeyNotFound, id.Short())
	case target.Error != "" && !target.aboveBounds: // not a key: always removable
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
	id, err := saveKeyFile(ctx, r.be, r.keys, r.keys.Tiers(), password, kdf, r.cfg.ID, r.now(), nil)
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
