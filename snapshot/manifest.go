package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
)

// ManifestVersion is the snapshot manifest encoding version.
const ManifestVersion = 1

// Totals count what a capture saw and stored.
type Totals struct {
	Files    uint64 `json:"files"`
	Dirs     uint64 `json:"dirs"`
	Bytes    uint64 `json:"bytes"`     // file content bytes in the snapshot
	NewBytes uint64 `json:"new_bytes"` // content bytes this capture stored that were not stored before (every read of a file read twice counts)
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
// A snapshot that does not load is a *ManifestError; one whose object
// opened but whose content does not decode or validate matches
// repo.ErrCorrupt.
func LoadManifest(ctx context.Context, s ObjectStore, id blob.ID) (*Manifest, error) {
	t, b, err := s.LoadObject(ctx, crypt.KindSnapshot, id)
	if err != nil {
		return nil, &ManifestError{ID: id, Err: fmt.Errorf("snapshot %s: %w", id.Short(), err)}
	}
	if t != blob.Workspace {
		return nil, &ManifestError{ID: id, Err: fmt.Errorf("snapshot %s is sealed in the %s tier, not workspace: %w", id.Short(), t, repo.ErrCorrupt)}
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, manifestDamaged(id, b, fmt.Errorf("snapshot %s does not decode (%w): %w", id.Short(), repo.ErrCorrupt, err))
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return nil, manifestDamaged(id, b, fmt.Errorf("snapshot %s does not decode (%w): %d bytes after its JSON object", id.Short(), repo.ErrCorrupt, len(rest)))
	}
	if err := blob.CheckTime("its time", m.Time); err != nil {
		return nil, manifestDamaged(id, b, fmt.Errorf("snapshot %s (%w): %w", id.Short(), repo.ErrCorrupt, err))
	}
	if err := m.Validate(); err != nil {
		return nil, manifestDamaged(id, b, fmt.Errorf("snapshot %s (%w): %w", id.Short(), repo.ErrCorrupt, err))
	}
	m.ID = id
	return &m, nil
}

// ManifestError is a snapshot that is stored but does not load: its
// object does not open (damaged, tampered with, or the storage failed) or
// its content does not decode or validate. Workspace and Time are set when
// the object opened (it is authenticated: a key holder wrote it) and they
// decode although the whole does not, or when the snapshot catalog holds
// them from an earlier read; they are empty otherwise.
type ManifestError struct {
	ID        blob.ID
	Workspace string
	Time      time.Time
	Err       error // names the snapshot
}

func (e *ManifestError) Error() string { return e.Err.Error() }
func (e *ManifestError) Unwrap() error { return e.Err }

// manifestDamaged is the ManifestError of an authenticated manifest b
// that does not decode or validate, with what of it does.
func manifestDamaged(id blob.ID, b []byte, err error) *ManifestError {
	var part struct {
		Workspace string    `json:"workspace"`
		Time      time.Time `json:"time"`
	}
	if json.Unmarshal(b, &part) != nil {
		return &ManifestError{ID: id, Err: err}
	}
	return &ManifestError{ID: id, Workspace: part.Workspace, Time: part.Time, Err: err}
}

// List loads every snapshot (of workspace ws, or all when ws is empty),
// oldest first. Snapshots that do not load are returned in bad.
func List(ctx context.Context, s ObjectStore, ws string) (snaps []*Manifest, bad map[blob.ID]error, err error) {
	snaps, bad, err = listPrefix(ctx, s, "", ws)
	slices.SortFunc(snaps, func(a, b *Manifest) int { return listOrder(a.Time, a.ID, b.Time, b.ID) })
	return snaps, bad, err
}

// listPrefix loads the snapshots whose ids start with prefix (all with
// ""), of workspace ws or of all, in no order: it lists the ids first and
// loads only those, so that naming one snapshot costs one load, not one
// per snapshot in the repository. With ws given and no prefix, it loads
// only the snapshots the catalog does not place in another workspace.
func listPrefix(ctx context.Context, s ObjectStore, prefix, ws string) (snaps []*Manifest, bad map[blob.ID]error, err error) {
	l, err := listSnapshots(ctx, s, prefix)
	if err != nil {
		return nil, nil, err
	}
	// An id prefix names one snapshot or a few: those are all read, so
	// that a damaged one is named whatever workspace the catalog gives it.
	err = l.load(ctx, s, func(e *listedSnapshot) bool { return ws == "" || prefix != "" || e.rec == nil || e.rec.workspace == ws })
	if err != nil {
		return nil, nil, err
	}
	l.remember()
	bad = map[blob.ID]error{}
	for _, e := range l.all {
		switch {
		case e.err != nil:
			bad[e.id] = e.err
		case e.m != nil && (ws == "" || e.m.Workspace == ws):
			snaps = append(snaps, e.m)
		}
	}
	return snaps, bad, nil
}

// listOrder compares the snapshots (at, id) and (bt, bid) in List's
// order: by time, then by id.
func listOrder(at time.Time, id blob.ID, bt time.Time, bid blob.ID) int {
	if c := at.Compare(bt); c != 0 {
		return c
	}
	return bytes.Compare(id[:], bid[:])
}

// findLatest finds the newest complete snapshot of ws that loads, or nil,
// and returns with it the snapshots that did not load. It loads the
// snapshots the catalog does not know, then those of ws, newest first,
// until one is complete and loads.
func findLatest(ctx context.Context, s ObjectStore, ws string) (m *Manifest, bad map[blob.ID]error, err error) {
	l, err := listSnapshots(ctx, s, "")
	if err != nil {
		return nil, nil, err
	}
	if err := l.load(ctx, s, func(e *listedSnapshot) bool { return e.rec == nil }); err != nil {
		return nil, nil, err
	}
	var cands []*listedSnapshot
	for i := range l.all {
		if e := &l.all[i]; e.err == nil && e.workspace() == ws {
			cands = append(cands, e)
		}
	}
	slices.SortFunc(cands, func(a, b *listedSnapshot) int { return listOrder(a.at(), a.id, b.at(), b.id) })
	for i := len(cands) - 1; i >= 0 && m == nil; i-- {
		e := cands[i]
		if !e.complete() {
			continue
		}
		if e.m == nil {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			e.m, e.err = LoadManifest(ctx, s, e.id)
			var me *ManifestError
			if errors.As(e.err, &me) && me.Workspace == "" {
				// Its catalog record says what its manifest said.
				me.Workspace, me.Time = e.rec.workspace, e.rec.time
			}
		}
		if e.m != nil && e.m.Workspace == ws && e.m.Complete {
			m = e.m
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err // the last load may have failed for it
	}
	l.remember()
	bad = map[blob.ID]error{}
	for _, e := range l.all {
		if e.err != nil {
			bad[e.id] = e.err
		}
	}
	return m, bad, nil
}

// manifestLoaders is how many snapshot manifests a listing loads at once.
const manifestLoaders = 16

// ErrNoSnapshot: no snapshot matches.
var ErrNoSnapshot = errors.New("no matching snapshot")

// Find resolves ref as Resolve does, except that `latest` passes over
// snapshots that cannot be read (ResolveOptions.SkipDamaged): for a
// capture's parent, which only speeds the capture up. Commands that show
// or restore what `latest` names use Resolve.
func Find(ctx context.Context, s ObjectStore, ref, ws string) (*Manifest, error) {
	m, _, err := Resolve(ctx, s, ref, ws, ResolveOptions{SkipDamaged: true})
	return m, err
}

// ResolveOptions change how Resolve treats snapshots that cannot be read.
type ResolveOptions struct {
	// SkipDamaged lets `latest` fall back to the newest complete snapshot
	// that can be read, past any that cannot; Resolve returns those.
	SkipDamaged bool
}

// Resolve resolves "latest" (the newest complete snapshot of workspace ws,
// which must be given) or a unique id prefix of at least 4 hex characters.
//
// A snapshot whose manifest cannot be read is never silently passed over:
// an id prefix that names one gets its *ManifestError (repo.ErrCorrupt for
// a damaged one: exit code 13). `latest` fails with a *LatestError when a
// snapshot that cannot be read may be the newest of ws (its workspace and
// time are unknown, or say it is of ws and comes after the newest readable
// complete one in List's order: by time, then id); with o.SkipDamaged it
// returns the newest readable complete snapshot and, in skipped, those it
// passed over, in id order. A snapshot's workspace, time and completeness
// may come from the snapshot catalog (catalog.go), which holds what its
// manifest said when it was read: `latest` reads only the snapshots the
// catalog does not know and the complete ones of ws from the newest down
// to the answer, so damage to a snapshot the catalog knows to be another
// workspace's, partial, or before the answer is not seen here (`lifeboat
// check` sees it).
func Resolve(ctx context.Context, s ObjectStore, ref, ws string, o ResolveOptions) (m *Manifest, skipped []*ManifestError, err error) {
	if ref == "latest" && ws == "" {
		return nil, nil, fmt.Errorf("`latest` needs --workspace")
	}
	if ref != "latest" && len(ref) < 4 {
		return nil, nil, fmt.Errorf("snapshot id %q is too short: give at least 4 hex characters", ref)
	}
	var snaps []*Manifest
	var bad map[blob.ID]error
	if ref == "latest" {
		m, bad, err = findLatest(ctx, s, ws)
	} else {
		snaps, bad, err = listPrefix(ctx, s, strings.ToLower(ref), ws)
	}
	if err != nil {
		return nil, nil, err
	}
	damaged := make([]*ManifestError, 0, len(bad))
	for id, err := range bad {
		me, ok := err.(*ManifestError)
		if !ok {
			me = &ManifestError{ID: id, Err: err}
		}
		damaged = append(damaged, me)
	}
	slices.SortFunc(damaged, func(a, b *ManifestError) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	if ref == "latest" {
		for _, d := range damaged {
			if d.Workspace != "" && d.Workspace != ws || m != nil && !d.Time.IsZero() && listOrder(d.Time, d.ID, m.Time, m.ID) < 0 {
				continue // another workspace's, or before the newest readable one in List's order
			}
			skipped = append(skipped, d)
		}
		if len(skipped) > 0 && !o.SkipDamaged {
			return nil, skipped, &LatestError{Workspace: ws, Damaged: skipped, Fallback: m}
		}
		if m == nil && len(skipped) > 0 {
			return nil, skipped, fmt.Errorf("%w: workspace %q has no complete snapshot that can be read", ErrNoSnapshot, ws)
		}
		if m == nil {
			return nil, nil, fmt.Errorf("%w: workspace %q has no complete snapshot", ErrNoSnapshot, ws)
		}
		return m, skipped, nil
	}
	prefix := strings.ToLower(ref)
	var found []*Manifest
	for _, m := range snaps {
		if strings.HasPrefix(m.ID.String(), prefix) {
			found = append(found, m)
		}
	}
	var foundBad []*ManifestError
	for _, d := range damaged {
		if strings.HasPrefix(d.ID.String(), prefix) {
			foundBad = append(foundBad, d)
		}
	}
	switch {
	case len(found)+len(foundBad) > 1:
		return nil, nil, fmt.Errorf("snapshot id %q matches %d snapshots; give more characters", ref, len(found)+len(foundBad))
	case len(found) == 1:
		return found[0], nil, nil
	case len(foundBad) == 1:
		return nil, nil, fmt.Errorf("%w; it cannot be read: run `lifeboat check` to see the damage, and choose another snapshot (`lifeboat snapshots`)", foundBad[0])
	}
	return nil, nil, fmt.Errorf("%w: %q (list them with `lifeboat snapshots`)", ErrNoSnapshot, ref)
}

// LatestError: `latest` could not be resolved because snapshots that
// cannot be read may be newer than the newest one that can. It unwraps to
// their errors (repo.ErrCorrupt when damaged: exit code 13).
type LatestError struct {
	Workspace string
	Damaged   []*ManifestError // in id order
	Fallback  *Manifest        // the newest complete snapshot that can be read; nil if none
}

func (e *LatestError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "`latest` of workspace %q is not resolved: ", e.Workspace)
	for i, d := range e.Damaged {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Damaged)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.Error())
	}
	if len(e.Damaged) == 1 {
		b.WriteString(". This snapshot cannot be read and may be the newest")
	} else {
		b.WriteString(". These snapshots cannot be read and may be the newest")
	}
	b.WriteString(". Run `lifeboat check`; name a snapshot by its id")
	if e.Fallback != nil {
		fmt.Fprintf(&b, ", or pass --skip-damaged to use the newest complete snapshot that can be read (%s, %s)",
			e.Fallback.ID.Short(), e.Fallback.Time.UTC().Format(time.RFC3339))
	}
	return b.String()
}

func (e *LatestError) Unwrap() []error {
	errs := make([]error, len(e.Damaged))
	for i, d := range e.Damaged {
		errs[i] = d
	}
	return errs
}

// PrefixLookup finds the files a snapshot holds as a verified prefix
// (Manifest.Prefixes) by the paths Walk gives.
type PrefixLookup map[string]CapturePrefix

// PrefixLookup indexes m.Prefixes. Files past the listed ones
// (PrefixesNotListed) are not found.
func (m *Manifest) PrefixLookup() PrefixLookup {
	l := make(PrefixLookup, len(m.Prefixes))
	for _, p := range m.Prefixes {
		l[p.Path] = p
	}
	return l
}

// Find returns the prefix entry of the file at walkPath (slash-separated
// from the root, raw bytes, as Walk gives it), if listed. Paths are
// compared in the manifest's escaped form, so a UTF-8 name spelling
// another name's escape (a literal `\xff`) matches it too.
func (l PrefixLookup) Find(walkPath string) (CapturePrefix, bool) {
	if len(l) == 0 {
		return CapturePrefix{}, false
	}
	p, ok := l[EscapePath([]byte(walkPath))]
	return p, ok
}
