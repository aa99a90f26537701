package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// SensitivePartVersion is the encoding version of SensitivePart.
const SensitivePartVersion = 1

// SensitivePart lists the sensitive trees of one snapshot (its browser
// profiles). It is stored as one tree-type blob of the sensitive tier, so
// it is sealed with the sensitive key, named by a sensitive-keyed id and
// kept in sensitive packs; the workspace manifest holds only that id
// (Manifest.Sensitive). A key without the sensitive tier can see that the
// reference exists and nothing else: not the paths, counts or sizes.
type SensitivePart struct {
	Version int `json:"version"`
	// Salt is 16 random bytes, new for every snapshot, so two snapshots
	// never share the part's id even when their trees are identical: the
	// reference does not tell a workspace key whether profiles changed.
	Salt  []byte          `json:"salt"`
	Trees []SensitiveTree `json:"trees"`
}

// SensitiveTree is one subtree captured into the sensitive tier.
type SensitiveTree struct {
	Path     string         `json:"path"` // slash path from the snapshot root
	Kind     string         `json:"kind"` // e.g. "chromium", "firefox"
	Root     Node           `json:"root"` // the directory itself; Subtree lists its entries (sensitive tier)
	Totals   Totals         `json:"totals"`
	Complete bool           `json:"complete"`
	Errors   []CaptureError `json:"errors,omitempty"` // paths relative to Path
}

// ErrSensitiveLocked: the snapshot has a sensitive part and the key in use
// cannot open it. It wraps crypt.ErrTierLocked where that is the cause.
var ErrSensitiveLocked = errors.New("this snapshot has a sensitive part (browser profiles) that the key in use cannot open")

// LoadSensitivePart loads and checks m's sensitive part. It returns nil
// and no error when m has none. A key without the sensitive tier gets an
// error matching both ErrSensitiveLocked and crypt.ErrTierLocked.
func LoadSensitivePart(ctx context.Context, l BlobLoader, m *Manifest) (*SensitivePart, error) {
	if m.Sensitive == nil {
		return nil, nil
	}
	b, err := l.LoadBlob(ctx, blob.Sensitive, blob.Tree, *m.Sensitive, nil)
	if err != nil {
		if errors.Is(err, crypt.ErrTierLocked) {
			return nil, fmt.Errorf("snapshot %s: %w: %w", m.ID.Short(), ErrSensitiveLocked, err)
		}
		return nil, fmt.Errorf("snapshot %s: sensitive part: %w", m.ID.Short(), err)
	}
	p, err := DecodeSensitivePart(b)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", m.ID.Short(), err)
	}
	return p, nil
}

// DecodeSensitivePart decodes and checks a sensitive part's plaintext,
// which comes from storage and is untrusted: unknown fields, paths that
// are not clean, relative and disjoint, and roots that are not valid
// directories are refused.
func DecodeSensitivePart(b []byte) (*SensitivePart, error) {
	var p SensitivePart
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("sensitive part does not decode: %w", err)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("sensitive part: %w", err)
	}
	return &p, nil
}

func (p *SensitivePart) validate() error {
	if p.Version != SensitivePartVersion {
		return fmt.Errorf("version %d, this lifeboat reads version %d", p.Version, SensitivePartVersion)
	}
	seen := map[string]bool{}
	for i := range p.Trees {
		t := &p.Trees[i]
		comps, err := SplitPath(t.Path)
		if err != nil || len(comps) == 0 || strings.Join(comps, "/") != t.Path {
			return fmt.Errorf("%w: tree path %q is not a clean relative path", ErrUnsafeEntry, t.Path)
		}
		if seen[t.Path] {
			return fmt.Errorf("%w: tree path %q is listed twice", ErrUnsafeEntry, t.Path)
		}
		seen[t.Path] = true
		if t.Root.Type != TypeDir || len(t.Root.Subtree) == 0 {
			return fmt.Errorf("%w: tree %q is not a directory with entries", ErrUnsafeEntry, t.Path)
		}
		if err := t.Root.Valid(); err != nil {
			return fmt.Errorf("tree %q: %w", t.Path, err)
		}
	}
	for a := range seen {
		for b := range seen {
			if a != b && strings.HasPrefix(b, a+"/") {
				return fmt.Errorf("%w: tree paths %q and %q overlap", ErrUnsafeEntry, a, b)
			}
		}
	}
	return nil
}

// Grafts turns the part's trees into restore grafts.
func (p *SensitivePart) Grafts() []Graft {
	g := make([]Graft, len(p.Trees))
	for i := range p.Trees {
		g[i] = Graft{Path: p.Trees[i].Path, Root: p.Trees[i].Root, Tier: blob.Sensitive, Totals: p.Trees[i].Totals}
	}
	return g
}
