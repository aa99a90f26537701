package blob

import (
	"encoding/hex"
	"errors"
	"fmt"
)

// IDSize is the length of an ID in bytes.
const IDSize = 32

// ID names a blob (keyed BLAKE3 of its plaintext) or a stored object
// (unkeyed BLAKE3 of its stored bytes).
type ID [IDSize]byte

// ParseID decodes a 64-character lowercase or uppercase hex string.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*IDSize {
		return id, fmt.Errorf("invalid id %q: want %d hex characters, got %d", s, 2*IDSize, len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("invalid id %q: %w", s, err)
	}
	return id, nil
}

// String returns the full lowercase hex form.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short returns the first 8 hex characters, for display.
func (id ID) Short() string { return hex.EncodeToString(id[:4]) }

// IsNull reports whether id is all zeros.
func (id ID) IsNull() bool { return id == ID{} }

// MarshalText implements encoding.TextMarshaler.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *ID) UnmarshalText(b []byte) error {
	p, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// Type says what a blob holds. Values are part of the format.
type Type uint8

// Blob types.
const (
	Data Type = 1 // file content chunks
	Tree Type = 2 // directory listings and other metadata
)

// Valid reports whether t is a known type.
func (t Type) Valid() bool { return t == Data || t == Tree }

func (t Type) String() string {
	switch t {
	case Data:
		return "data"
	case Tree:
		return "tree"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Tier names an independent key tier. Values are part of the format.
type Tier uint8

// Key tiers.
const (
	Workspace Tier = 1 // workspace files and all repository metadata
	Sensitive Tier = 2 // browser profiles and other credential material
)

// Tiers lists every tier in a fixed order.
var Tiers = []Tier{Workspace, Sensitive}

// Valid reports whether t is a known tier.
func (t Tier) Valid() bool { return t == Workspace || t == Sensitive }

func (t Tier) String() string {
	switch t {
	case Workspace:
		return "workspace"
	case Sensitive:
		return "sensitive"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// ParseTier parses "workspace" or "sensitive".
func ParseTier(s string) (Tier, error) {
	switch s {
	case "workspace":
		return Workspace, nil
	case "sensitive":
		return Sensitive, nil
	}
	return 0, fmt.Errorf("unknown tier %q: want workspace or sensitive", s)
}

// MarshalText implements encoding.TextMarshaler.
func (t Tier) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, errors.New("invalid tier")
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Tier) UnmarshalText(b []byte) error {
	p, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}
