package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// ManifestVersion is the snapshot manifest encoding version.
const ManifestVersion = 1

// Totals count what a capture saw and stored.
type Totals struct {
	Files    uint64 `json:"files"`
	Dirs     uint64 `json:"dirs"`
	Bytes    uint64 `json:"bytes"`     // file content bytes in the snapshot
	NewBytes uint64 `json:"new_bytes"` // content bytes that were not stored before
}

// CaptureError is a path the capture could not record fully.
type CaptureError struct {
	Path  string `json:"path"` // slash-separated from the root; non-UTF-8 bytes escaped as \xNN
	Error string `json:"error"`
}

// CapturePrefix is a file that grew during both of its reads (a log being
// appended to): the snapshot holds its first Size bytes, checked to be
// exactly the file's first Size bytes when the second read ended, when
// the file had FileSize bytes (FileSize >= Size). Its node's metadata is
// from that moment too. It does not make the snapshot partial.
type CapturePrefix struct {
	Path     string `json:"path"` // as in CaptureError
	Size     uint64 `json:"size"`
	FileSize uint64 `json:"file_size"`
}

// Manifest is one snapshot. It is stored as a sealed object of kind
// snapshot in the workspace tier; its id is the object's name.
type Manifest struct {
	Version   int            `json:"version"`
	Workspace string         `json:"workspace"`
	Time      time.Time      `json:"time"`
	Host      string         `json:"host,omitempty"`
	Instance  string         `json:"instance,omitempty"` // the provider's instance id
	Paths     []string       `json:"paths"`
	Tags      []string       `json:"tags,omitempty"`
	Parent    *blob.ID       `json:"parent,omitempty"`
	Root      Node           `json:"root"` // the captured directory itself; its Subtree lists its entries
	Totals    Totals         `json:"totals"`
	Complete  bool           `json:"complete"` // false: partial, see Errors
	Errors    []CaptureError `json:"errors,omitempty"`
	// Prefixes lists the files captured as a verified prefix, by path (at
	// most 1000; PrefixesNotListed counts the others). Both are left out
	// when empty, so a snapshot without one reads as before.
	Prefixes          []CapturePrefix `json:"prefixes,omitempty"`
	PrefixesNotListed uint64          `json:"prefixes_not_listed,omitempty"`
	// Sensitive is the id of the snapshot's sensitive part (SensitivePart):
	// a tree blob of the sensitive tier. Only a key with that tier opens it.
	Sensitive *blob.ID `json:"sensitive,omitempty"`

	ID blob.ID `json:"-"` // set when loaded or saved
}

// ObjectStore stores sealed objects: repo.Repository satisfies it.
type ObjectStore interface {
	SaveObject(ctx context.Context, kind crypt.ObjectKind, t blob.Tier, plaintext []byte) (blob.ID, error)
	LoadObject(ctx context.Context, kind crypt.ObjectKind, id blob.ID) (blob.Tier, []byte, error)
	ListObjects(ctx context.Context, kind crypt.ObjectKind, fn func(blob.ID) error) error
}

// Validate checks a manifest read from storage.
func (m *Manifest) Validate() error {
	switch {
	case m.Version != ManifestVersion:
		return fmt.Errorf("snapshot version %d, this lifeboat reads version %d", m.Version, ManifestVersion)
	case m.Workspace == "":
		return errors.New("snapshot names no workspace")
	case m.Root.Type != TypeDir || len(m.Root.Subtree) == 0:
		return errors.New("snapshot root is not a directory with entries")
	}
	return m.Root.Valid()
}

// SaveManifest stores m. Call it only after the repository was flushed:
// the manifest must not reference anything that is not durable.
func SaveManifest(ctx context.Context, s ObjectStore, m *Manifest) (blob.ID, error) {
	m.Version = ManifestVersion
	if err := m.Validate(); err != nil {
		return blob.ID{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return blob.ID{}, err
	}
	id, err := s.SaveObject(ctx, crypt.KindSnapshot, blob.Workspace, b)
	m.ID = id
	return id, err
}

// LoadManifest loads and checks one snapshot.
func LoadManifest(ctx context.Context, s ObjectStore, id blob.ID) (*Manifest, error) {
	t, b, err := s.LoadObject(ctx, crypt.KindSnapshot, id)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id.Short(), err)
	}
	if t != blob.Workspace {
		return nil, fmt.Errorf("snapshot %s is sealed in the %s tier, not workspace", id.Short(), t)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("snapshot %s does not decode: %w", id.Short(), err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id.Short(), err)
	}
	m.ID = id
	return &m, nil
}

// List loads every snapshot (of workspace ws, or all when ws is empty),
// oldest first. Snapshots that do not load are returned in bad.
func List(ctx context.Context, s ObjectStore, ws string) (snaps []*Manifest, bad map[blob.ID]error, err error) {
	bad = map[blob.ID]error{}
	err = s.ListObjects(ctx, crypt.KindSnapshot, func(id blob.ID) error {
		m, err := LoadManifest(ctx, s, id)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			bad[id] = err
			return nil
		}
		if ws == "" || m.Workspace == ws {
			snaps = append(snaps, m)
		}
		return nil
	})
	sort.Slice(snaps, func(i, j int) bool {
		if !snaps[i].Time.Equal(snaps[j].Time) {
			return snaps[i].Time.Before(snaps[j].Time)
		}
		return bytes.Compare(snaps[i].ID[:], snaps[j].ID[:]) < 0
	})
	return snaps, bad, err
}

// ErrNoSnapshot: no snapshot matches.
var ErrNoSnapshot = errors.New("no matching snapshot")

// Find resolves "latest" (the newest complete snapshot of workspace ws,
// which must be given) or a unique id prefix of at least 4 hex characters.
func Find(ctx context.Context, s ObjectStore, ref, ws string) (*Manifest, error) {
	snaps, _, err := List(ctx, s, ws)
	if err != nil {
		return nil, err
	}
	if ref == "latest" {
		if ws == "" {
			return nil, fmt.Errorf("`latest` needs --workspace")
		}
		for i := len(snaps) - 1; i >= 0; i-- {
			if snaps[i].Complete {
				return snaps[i], nil
			}
		}
		return nil, fmt.Errorf("%w: workspace %q has no complete snapshot", ErrNoSnapshot, ws)
	}
	if len(ref) < 4 {
		return nil, fmt.Errorf("snapshot id %q is too short: give at least 4 hex characters", ref)
	}
	var found []*Manifest
	for _, m := range snaps {
		if strings.HasPrefix(m.ID.String(), strings.ToLower(ref)) {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%w: %q (list them with `lifeboat snapshots`)", ErrNoSnapshot, ref)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("snapshot id %q matches %d snapshots; give more characters", ref, len(found))
}
