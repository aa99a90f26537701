package crypt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"lifeboat/blob"
)

// KeyFileVersion is the key file format this code writes and reads.
const KeyFileVersion = 1

// maxKeyFileSize bounds what DecodeKeyFile will parse.
const maxKeyFileSize = 64 * 1024

// KeyFile is the stored, password-wrapped form of a MasterKeys subset.
// Everything but Data is readable without the password.
type KeyFile struct {
	Version  int         `json:"version"`
	Created  time.Time   `json:"created"`
	Hostname string      `json:"hostname,omitempty"`
	Username string      `json:"username,omitempty"`
	Tiers    []blob.Tier `json:"tiers"`
	KDF      KDFParams   `json:"kdf"`
	Data     []byte      `json:"data"` // Seal(masterKeysJSON) under the argon2id key
}

// keyMaterial is the sealed payload: raw keys of each unlocked tier.
type keyMaterial struct {
	Tiers map[blob.Tier]tierMaterial `json:"tiers"`
}

type tierMaterial struct {
	Enc []byte `json:"enc"`
	ID  []byte `json:"id"`
}

// KeyFileMeta is what a caller may show about a key file.
type KeyFileMeta struct {
	Created  time.Time
	Hostname string
	Username string
	Tiers    []blob.Tier
}

// keyAAD binds the sealed key material to its repository, its tier list
// and its public metadata, so a key file cannot be relabelled with more
// tiers, moved between repositories, or given another creation time, host
// or user.
func keyAAD(repoID blob.ID, tiers []blob.Tier, meta KeyFileMeta) []byte {
	aad := append([]byte("lifeboat-key-v1\x00"), repoID[:]...)
	for _, t := range tiers {
		aad = append(aad, byte(t))
	}
	for _, f := range []string{meta.Created.UTC().Format(time.RFC3339Nano), meta.Hostname, meta.Username} {
		aad = binary.LittleEndian.AppendUint16(aad, uint16(len(f)))
		aad = append(aad, f...)
	}
	return aad
}

// NewKeyFile wraps the tiers of m named in tiers under password. The
// workspace tier is required: it encrypts the repository's metadata.
// cache, unless nil, keeps the key-encryption key derived for it.
func NewKeyFile(m *MasterKeys, tiers []blob.Tier, password []byte, kdf KDFParams, repoID blob.ID, meta KeyFileMeta, cache KEKCache) ([]byte, error) {
	tiers = normalizeTiers(tiers)
	if !slices.Contains(tiers, blob.Workspace) {
		return nil, fmt.Errorf("a key must unlock the workspace tier")
	}
	if len(password) == 0 {
		return nil, fmt.Errorf("empty password: choose a non-empty password")
	}
	if err := kdf.Validate(); err != nil {
		return nil, err
	}
	if len(meta.Hostname) > 255 || len(meta.Username) > 255 {
		return nil, fmt.Errorf("host or user name longer than 255 bytes")
	}
	return sealKeyFile(m, tiers, password, kdf, repoID, meta, cache)
}

// sealKeyFile derives the key-encryption key and writes the key file,
// without NewKeyFile's checks (tests make key files of older Lifeboats).
func sealKeyFile(m *MasterKeys, tiers []blob.Tier, password []byte, kdf KDFParams, repoID blob.ID, meta KeyFileMeta, cache KEKCache) ([]byte, error) {
	mat := keyMaterial{Tiers: map[blob.Tier]tierMaterial{}}
	for _, t := range tiers {
		k, err := m.Tier(t)
		if err != nil {
			return nil, err
		}
		mat.Tiers[t] = tierMaterial{Enc: k.Enc[:], ID: k.IDKey[:]}
	}
	plain, err := json.Marshal(mat)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	kek := kdf.derive(password)
	defer clear(kek[:])
	keepKEK(cache, kdf, password, kek)
	kf := KeyFile{
		Version: KeyFileVersion, Created: meta.Created.UTC(), Hostname: meta.Hostname, Username: meta.Username,
		Tiers: tiers, KDF: kdf,
	}
	kf.Data = NewSealer(kek).Seal(nil, plain, keyAAD(repoID, tiers, kf.Meta()))
	return json.MarshalIndent(kf, "", "  ")
}

// DecodeKeyFile parses a key file's public part without the password.
func DecodeKeyFile(data []byte) (*KeyFile, error) {
	if len(data) > maxKeyFileSize {
		return nil, fmt.Errorf("%w: %d bytes is larger than any key file", ErrNotKeyFile, len(data))
	}
	var kf KeyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&kf); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotKeyFile, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the key file's JSON object", ErrNotKeyFile)
	}
	if kf.Version != KeyFileVersion {
		return nil, fmt.Errorf("%w: key file version %d, this lifeboat reads version %d", ErrNotKeyFile, kf.Version, KeyFileVersion)
	}
	// The bounds of older Lifeboats: a key file within them but beyond
	// today's decodes, and Open refuses it (OpenAboveBounds does not).
	if err := kf.KDF.validateLegacy(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotKeyFile, err)
	}
	if len(kf.Tiers) == 0 || !slices.Equal(kf.Tiers, normalizeTiers(kf.Tiers)) || !slices.Contains(kf.Tiers, blob.Workspace) {
		return nil, fmt.Errorf("%w: bad tier list %v", ErrNotKeyFile, kf.Tiers)
	}
	if err := blob.CheckTime("its creation time", kf.Created); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotKeyFile, err)
	}
	if len(kf.Data) < Overhead {
		return nil, fmt.Errorf("%w: sealed key data too short", ErrNotKeyFile)
	}
	return &kf, nil
}

// Meta returns the key file's public description.
func (kf *KeyFile) Meta() KeyFileMeta {
	return KeyFileMeta{Created: kf.Created, Hostname: kf.Hostname, Username: kf.Username, Tiers: kf.Tiers}
}

// Open unwraps the key file with password. A wrong password (or a key file
// from another repository) yields ErrWrongPassword. Parameters beyond the
// bounds yield ErrKDFCost before anything is derived.
func (kf *KeyFile) Open(password []byte, repoID blob.ID) (*MasterKeys, error) {
	return kf.OpenCached(password, repoID, nil)
}

// OpenCached is Open that first looks in cache for the key-encryption key
// of password and this key file, and keeps it there once derived.
func (kf *KeyFile) OpenCached(password []byte, repoID blob.ID, cache KEKCache) (*MasterKeys, error) {
	if err := kf.KDF.Validate(); err != nil {
		return nil, err
	}
	return kf.open(password, repoID, cache)
}

// OpenAboveBounds is Open for a key file the user named (--key-hint): it
// also derives parameters beyond the bounds, up to those older Lifeboats
// could create (1 GiB, 16 passes), so such a key still opens and can be
// given a new password within the bounds. Anything beyond those yields
// ErrKDFCost before anything is derived.
func (kf *KeyFile) OpenAboveBounds(password []byte, repoID blob.ID) (*MasterKeys, error) {
	if err := kf.KDF.validateLegacy(); err != nil {
		return nil, err
	}
	return kf.open(password, repoID, nil)
}

// open unwraps the key file with the key-encryption key cache holds for
// password (nil: no cache), else with one derived from it, which the
// cache then keeps. An entry that does not open the key file is passed
// over: the derivation decides.
func (kf *KeyFile) open(password []byte, repoID blob.ID, cache KEKCache) (*MasterKeys, error) {
	if m, ok := kf.OpenFromCache(password, repoID, cache); ok {
		return m, nil
	}
	aad := keyAAD(repoID, kf.Tiers, kf.Meta())
	kek := kf.KDF.derive(password)
	defer clear(kek[:])
	plain, err := NewSealer(kek).Open(nil, kf.Data, aad)
	if err != nil {
		return nil, ErrWrongPassword
	}
	defer clear(plain)
	m, err := kf.material(plain)
	if err == nil {
		keepKEK(cache, kf.KDF, password, kek)
	}
	return m, err
}

// OpenFromCache unwraps the key file with the key-encryption key cache
// holds for password, deriving nothing; false when it holds none, or one
// that does not open this key file.
func (kf *KeyFile) OpenFromCache(password []byte, repoID blob.ID, cache KEKCache) (*MasterKeys, bool) {
	kek, ok := cachedKEK(cache, kf.KDF, password)
	if !ok {
		return nil, false
	}
	plain, err := NewSealer(kek).Open(nil, kf.Data, keyAAD(repoID, kf.Tiers, kf.Meta()))
	clear(kek[:])
	if err != nil {
		return nil, false
	}
	defer clear(plain)
	m, err := kf.material(plain)
	return m, err == nil
}

// material decodes the unsealed key material of the tiers kf declares.
func (kf *KeyFile) material(plain []byte) (*MasterKeys, error) {
	var mat keyMaterial
	if err := json.Unmarshal(plain, &mat); err != nil {
		return nil, fmt.Errorf("%w: sealed key material does not decode: %v", ErrNotKeyFile, err)
	}
	m := &MasterKeys{tiers: map[blob.Tier]*TierKeys{}}
	for _, t := range kf.Tiers {
		tm, ok := mat.Tiers[t]
		if !ok || len(tm.Enc) != KeySize || len(tm.ID) != KeySize {
			return nil, fmt.Errorf("%w: key material lacks the %s tier it claims", ErrNotKeyFile, t)
		}
		m.tiers[t] = NewTierKeys(t, Key(tm.Enc), Key(tm.ID))
	}
	if len(mat.Tiers) != len(kf.Tiers) {
		return nil, fmt.Errorf("%w: key material holds tiers it does not declare", ErrNotKeyFile)
	}
	return m, nil
}

// normalizeTiers returns the valid tiers of ts, deduplicated, in blob.Tiers order.
func normalizeTiers(ts []blob.Tier) []blob.Tier {
	var out []blob.Tier
	for _, t := range blob.Tiers {
		if slices.Contains(ts, t) {
			out = append(out, t)
		}
	}
	return out
}
