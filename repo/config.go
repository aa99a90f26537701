package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/chunk"
	"lifeboat/crypt"
	"lifeboat/pack"
)

// FormatVersion is the repository format this code reads and writes.
const FormatVersion = 1

// Params are the repository-wide settings fixed at init.
type Params struct {
	Version     int              `json:"version"`
	ID          blob.ID          `json:"id"`
	Created     time.Time        `json:"created"`
	PackSize    int              `json:"pack_size"`
	Compression pack.Compression `json:"compression"`
	Chunker     chunk.Params     `json:"chunker"`
}

// Config is the stored config file: public Params plus one sealed section
// per tier holding that tier's secret chunker polynomial and a copy of the
// Params, which Open compares with the public ones to catch tampering.
type Config struct {
	Params
	Tiers map[blob.Tier][]byte `json:"tiers"`
}

// tierSection is the sealed plaintext of one tier's config section.
type tierSection struct {
	Params Params    `json:"params"`
	Pol    chunk.Pol `json:"chunker_polynomial"`
}

func newConfig(keys *crypt.MasterKeys, p Params) (*Config, map[blob.Tier]chunk.Pol, error) {
	cfg := &Config{Params: p, Tiers: map[blob.Tier][]byte{}}
	pols := map[blob.Tier]chunk.Pol{}
	for _, t := range blob.Tiers {
		pol, err := chunk.RandomPol()
		if err != nil {
			return nil, nil, err
		}
		k, err := keys.Tier(t)
		if err != nil {
			return nil, nil, err
		}
		plain, err := json.Marshal(tierSection{Params: p, Pol: pol})
		if err != nil {
			return nil, nil, err
		}
		cfg.Tiers[t] = crypt.SealObject(k, crypt.KindConfig, plain)
		pols[t] = pol
	}
	return cfg, pols, nil
}

// ErrAccessDenied: the repository's storage refused this user (permission
// denied): the repository may well be there, so this is not
// ErrNoRepository. The CLI exits with 22.
var ErrAccessDenied = errors.New("permission denied on the repository")

// loadConfig reads the config's public part and checks its version. Only a
// missing config is ErrNoRepository; a refused one is ErrAccessDenied, and
// any other failure (an I/O error, a cancelled context) is returned as it
// is.
func loadConfig(ctx context.Context, be backend.Backend) (*Config, error) {
	data, err := be.Load(ctx, backend.Handle{Type: backend.Config, Name: "config"}, 0, 0)
	switch {
	case err == nil:
		return decodeConfig(data, be.Location())
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%w at %s: %w; run lifeboat as a user that may read the repository (its owner), or give this user read access to its files", ErrAccessDenied, be.Location(), err)
	case errors.Is(err, backend.ErrNotFound):
		if t, lerr := firstStored(ctx, be); lerr == nil && t != "" {
			return nil, fmt.Errorf("%w at %s: %s: %w", ErrNoRepository, be.Location(), withoutConfig(ctx, be, t), err)
		}
		return nil, fmt.Errorf("%w at %s (run `lifeboat init` to create one): %w", ErrNoRepository, be.Location(), err)
	}
	return nil, fmt.Errorf("reading the config of the repository at %s: %w", be.Location(), err)
}

// firstStored returns the first of keys, snapshots, index and packs of
// which be holds a file, or "" when it holds none: what a location
// without a config must not hold for init to write a new one.
func firstStored(ctx context.Context, be backend.Backend) (backend.FileType, error) {
	return firstOf(ctx, be, backend.Key, backend.Snapshot, backend.Index, backend.Pack)
}

// withoutConfig says what to do about a location whose config is missing
// and whose first stored type is t: put the config back, or, when key
// files alone are there (what an init that did not finish leaves), remove
// them and run init again.
func withoutConfig(ctx context.Context, be backend.Backend, t backend.FileType) string {
	if t == backend.Key {
		if more, err := firstOf(ctx, be, backend.Snapshot, backend.Index, backend.Pack); err == nil && more == "" {
			return fmt.Sprintf("its config is missing and keys/ alone holds files, as an init that did not finish leaves them: if no repository was made at %s, remove keys/ there and run init again; else put the config back from a backup or another copy of the repository", be.Location())
		}
	}
	return fmt.Sprintf("its config is missing but %s/ holds its files; put the config back from a backup or another copy of the repository (a new config would leave them unreadable)", t)
}

// firstOf returns the first of types of which be holds a file, or "".
func firstOf(ctx context.Context, be backend.Backend, types ...backend.FileType) (backend.FileType, error) {
	errFound := errors.New("found")
	for _, t := range types {
		err := be.List(ctx, t, func(backend.FileInfo) error { return errFound })
		if errors.Is(err, errFound) {
			return t, nil
		}
		if err != nil {
			return "", fmt.Errorf("listing %s of %s: %w", t, be.Location(), err)
		}
	}
	return "", nil
}

func decodeConfig(data []byte, where string) (*Config, error) {
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%w: config at %s is not valid JSON: %v", ErrCorrupt, where, err)
	}
	if v.Version > FormatVersion {
		return nil, fmt.Errorf("%w: %s has format version %d, this lifeboat reads up to %d; upgrade lifeboat", ErrNewerFormat, where, v.Version, FormatVersion)
	}
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%w: config at %s: %v", ErrCorrupt, where, err)
	}
	if cfg.Version != FormatVersion {
		return nil, fmt.Errorf("%w: config at %s has format version %d", ErrCorrupt, where, cfg.Version)
	}
	if err := blob.CheckTime("created", cfg.Created); err != nil {
		return nil, fmt.Errorf("%w: config at %s: %v", ErrCorrupt, where, err)
	}
	if err := cfg.Chunker.Validate(); err != nil {
		return nil, fmt.Errorf("%w: config at %s: %v", ErrCorrupt, where, err)
	}
	if _, err := pack.ParseCompression(string(cfg.Compression)); err != nil {
		return nil, fmt.Errorf("%w: config at %s: %v", ErrCorrupt, where, err)
	}
	if cfg.PackSize < 1<<20 || cfg.PackSize > pack.MaxPackSize/2 {
		return nil, fmt.Errorf("%w: config at %s: pack size %d out of range", ErrCorrupt, where, cfg.PackSize)
	}
	return &cfg, nil
}

// openSections opens the tier sections the keys unlock and checks that
// each repeats the public Params.
func (c *Config) openSections(keys *crypt.MasterKeys) (map[blob.Tier]chunk.Pol, error) {
	pols := map[blob.Tier]chunk.Pol{}
	for _, t := range keys.Tiers() {
		sealed, ok := c.Tiers[t]
		if !ok {
			return nil, fmt.Errorf("%w: config lacks its %s section", ErrCorrupt, t)
		}
		sealedTier, plain, err := crypt.OpenObject(keys, crypt.KindConfig, sealed)
		if err != nil {
			return nil, fmt.Errorf("%w: config %s section: %w", ErrCorrupt, t, err)
		}
		if sealedTier != t {
			return nil, fmt.Errorf("%w: the config's %s section was sealed for the %s tier (tampered?)", ErrCorrupt, t, sealedTier)
		}
		var s tierSection
		if err := json.Unmarshal(plain, &s); err != nil {
			return nil, fmt.Errorf("%w: config %s section: %v", ErrCorrupt, t, err)
		}
		sealedParams, public := s.Params, c.Params
		sameTime := sealedParams.Created.Equal(public.Created)
		sealedParams.Created, public.Created = time.Time{}, time.Time{}
		if !sameTime || sealedParams != public {
			return nil, fmt.Errorf("%w: the public config differs from its sealed copy (tampered?)", ErrCorrupt)
		}
		if s.Pol == 0 || !s.Pol.Irreducible() {
			return nil, fmt.Errorf("%w: config %s section has an invalid chunker polynomial", ErrCorrupt, t)
		}
		pols[t] = s.Pol
	}
	return pols, nil
}
