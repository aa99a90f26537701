package crypt

import (
	"fmt"
	"sync"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
)

// TierKeys are one tier's keys: Enc seals blobs and objects of the tier,
// IDKey keys the BLAKE3 hash that names the tier's blobs.
type TierKeys struct {
	Tier  blob.Tier
	Enc   Key
	IDKey Key

	*Sealer
	hashers sync.Pool
}

// NewTierKeys builds the tier's sealer and id hasher from raw keys.
func NewTierKeys(t blob.Tier, enc, id Key) *TierKeys {
	k := &TierKeys{Tier: t, Enc: enc, IDKey: id, Sealer: NewSealer(enc)}
	k.hashers.New = func() any {
		h, err := blake3.NewKeyed(k.IDKey[:])
		if err != nil {
			panic(err) // only for a wrong key size
		}
		return h
	}
	return k
}

// BlobID returns the keyed BLAKE3-256 of data: the blob's id in this tier.
func (k *TierKeys) BlobID(data []byte) blob.ID {
	h := k.hashers.Get().(*blake3.Hasher)
	h.Reset()
	_, _ = h.Write(data)
	var id blob.ID
	h.Sum(id[:0])
	k.hashers.Put(h)
	return id
}

// MasterKeys is the set of tier keys one key file unlocks.
type MasterKeys struct {
	tiers map[blob.Tier]*TierKeys
}

// NewMasterKeys makes fresh random keys for every tier.
func NewMasterKeys() *MasterKeys {
	m := &MasterKeys{tiers: map[blob.Tier]*TierKeys{}}
	for _, t := range blob.Tiers {
		m.tiers[t] = NewTierKeys(t, NewRandomKey(), NewRandomKey())
	}
	return m
}

// Tier returns the keys of t, or ErrTierLocked when this set lacks them.
func (m *MasterKeys) Tier(t blob.Tier) (*TierKeys, error) {
	k := m.tiers[t]
	if k == nil {
		return nil, fmt.Errorf("%s tier: %w", t, ErrTierLocked)
	}
	return k, nil
}

// Has reports whether the set holds the keys of t.
func (m *MasterKeys) Has(t blob.Tier) bool { return m.tiers[t] != nil }

// Tiers lists the tiers this set unlocks, in blob.Tiers order.
func (m *MasterKeys) Tiers() []blob.Tier {
	var ts []blob.Tier
	for _, t := range blob.Tiers {
		if m.Has(t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// Restrict returns a set holding only the named tiers. It fails if this set
// lacks one of them: a key can only hand on what it has.
func (m *MasterKeys) Restrict(tiers []blob.Tier) (*MasterKeys, error) {
	r := &MasterKeys{tiers: map[blob.Tier]*TierKeys{}}
	for _, t := range tiers {
		k, err := m.Tier(t)
		if err != nil {
			return nil, err
		}
		r.tiers[t] = k
	}
	if len(r.tiers) == 0 {
		return nil, fmt.Errorf("a key must unlock at least one tier")
	}
	return r, nil
}
