package crypt

import (
	"fmt"

	"lifeboat/blob"
)

// ObjectKind says what a sealed object holds. Values are part of the format.
type ObjectKind uint8

// Object kinds sealed with SealObject.
const (
	KindConfig   ObjectKind = 1 // a tier's section of the config
	KindIndex    ObjectKind = 2
	KindSnapshot ObjectKind = 3
	KindLock     ObjectKind = 4
	KindPolicy   ObjectKind = 5 // a workspace's retention policy
	KindPin      ObjectKind = 6 // the snapshots the lifecycle holds for a workspace
	// KindCondemned lists packs a prune condemned (repo.Condemnation).
	KindCondemned ObjectKind = 7
)

func (k ObjectKind) String() string {
	switch k {
	case KindConfig:
		return "config"
	case KindIndex:
		return "index"
	case KindSnapshot:
		return "snapshot"
	case KindLock:
		return "lock"
	case KindPolicy:
		return "policy"
	case KindPin:
		return "pin"
	case KindCondemned:
		return "condemnation"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ObjectHeaderSize is the plaintext prefix of a sealed object:
// magic "LBO", version 1, tier, kind.
const ObjectHeaderSize = 6

// SealObject returns header || Seal(plaintext) with the header as the
// additional data, so the kind and tier cannot be changed or swapped.
func SealObject(k *TierKeys, kind ObjectKind, plaintext []byte) []byte {
	hdr := []byte{'L', 'B', 'O', 1, byte(k.Tier), byte(kind)}
	out := make([]byte, 0, ObjectHeaderSize+Overhead+len(plaintext))
	out = append(out, hdr...)
	return k.Seal(out, plaintext, hdr)
}

// ObjectTier reads the tier and kind from a sealed object's header.
func ObjectTier(data []byte) (blob.Tier, ObjectKind, error) {
	if len(data) < ObjectHeaderSize+Overhead || string(data[:3]) != "LBO" {
		return 0, 0, fmt.Errorf("not a lifeboat object (bad magic or truncated to %d bytes)", len(data))
	}
	if data[3] != 1 {
		return 0, 0, fmt.Errorf("object format version %d, this lifeboat reads version 1", data[3])
	}
	t := blob.Tier(data[4])
	if !t.Valid() {
		return 0, 0, fmt.Errorf("object names unknown tier %d", data[4])
	}
	return t, ObjectKind(data[5]), nil
}

// OpenObject checks that data is a sealed object of the wanted kind and
// opens it with the keys of its tier from m.
func OpenObject(m *MasterKeys, want ObjectKind, data []byte) (blob.Tier, []byte, error) {
	t, kind, err := ObjectTier(data)
	if err != nil {
		return 0, nil, err
	}
	if kind != want {
		return t, nil, fmt.Errorf("object is a %s, expected a %s", kind, want)
	}
	k, err := m.Tier(t)
	if err != nil {
		return t, nil, err
	}
	plain, err := k.Open(nil, data[ObjectHeaderSize:], data[:ObjectHeaderSize])
	return t, plain, err
}
