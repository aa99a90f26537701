package prune

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
)

// PinVersion is the version of pin objects this code reads and writes.
const PinVersion = 1

// Pin is what the lifecycle (`lifeboat serve`) holds in the repository for
// one workspace: the snapshots no forget or prune may remove, whatever a
// policy says, with why. Its own state store is not readable by other
// processes, so it records these holds here (a sealed object of kind pin
// in the workspace tier, pins/<id>), rewriting the workspace's pin
// whenever they change (SetPin).
type Pin struct {
	Version   int    `json:"version"`
	Workspace string `json:"workspace"`
	// Owner names the holder that wrote the pin (a lifecycle's state
	// store): a holder replaces and removes only its own pins, so two
	// state stores using one workspace id on one repository do not undo
	// each other's holds. Every pin holds, whoever owns it.
	Owner     string           `json:"owner,omitempty"`
	Snapshots []PinnedSnapshot `json:"snapshots,omitempty"`
	// All holds every snapshot of the workspace (it is lost and an offer is
	// open, or a recovery runs: any of them may be chosen), with AllWhy.
	All    bool      `json:"all,omitempty"`
	AllWhy string    `json:"all_why,omitempty"`
	Set    time.Time `json:"set"` // when it was written (informative: every pin object holds)

	ID blob.ID `json:"-"` // the pin object's name
}

// PinnedSnapshot is one held snapshot and why, e.g. "last good checkpoint
// of the lifecycle" or "recovery operation op-1 approved it".
type PinnedSnapshot struct {
	ID  blob.ID `json:"id"` // hex in JSON
	Why string  `json:"why"`
}

func (p Pin) validate() error {
	if p.Version != PinVersion {
		return fmt.Errorf("pin version %d, this lifeboat reads version %d", p.Version, PinVersion)
	}
	if p.Workspace == "" {
		return errors.New("a pin needs a workspace")
	}
	for _, s := range p.Snapshots {
		if s.ID.IsNull() {
			return errors.New("a pin names the null snapshot id")
		}
	}
	return nil
}

// SetPin stores p as the pin of workspace p.Workspace, then removes the
// pin objects of that workspace that were there before. The new pin is
// written first, so an interruption leaves the old and the new, and both
// hold (LoadPins takes the union). Pin objects listed before the new one
// was written are the only ones removed, so two SetPin of one workspace at
// once leave at least one of the two. Version and Set are filled in.
//
// A pin object that does not load is left alone (its workspace is
// unknown); LoadPins reports it.
func SetPin(ctx context.Context, o Objects, p Pin, now time.Time) (Pin, error) {
	old, _, err := listPins(ctx, o)
	if err != nil {
		return p, err
	}
	var ids []blob.ID
	for _, q := range old {
		if q.Workspace == p.Workspace {
			ids = append(ids, q.ID)
		}
	}
	return ReplacePin(ctx, o, p, now, ids)
}

// ReplacePin stores p as the pin of workspace p.Workspace, then removes
// the pin objects old (the ones the caller knows it wrote for that
// workspace): SetPin without listing the repository's pins, for a holder
// that keeps track of its own. The new pin is written first, as in SetPin.
func ReplacePin(ctx context.Context, o Objects, p Pin, now time.Time, old []blob.ID) (Pin, error) {
	p.Version, p.Set, p.ID = PinVersion, now.UTC(), blob.ID{}
	if err := p.validate(); err != nil {
		return p, err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	if p.ID, err = o.SaveObject(ctx, crypt.KindPin, blob.Workspace, b); err != nil {
		return p, fmt.Errorf("storing the pin of workspace %q: %w", p.Workspace, err)
	}
	for _, id := range old {
		if id == p.ID {
			continue
		}
		if err := o.RemoveObject(ctx, crypt.KindPin, id); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return p, fmt.Errorf("new pin of workspace %q stored, but removing the old pins/%s failed (it still holds what it held): %w", p.Workspace, id, err)
		}
	}
	return p, nil
}

// OwnPins lists the pin objects owner wrote, of every workspace. Pin
// objects that do not load are left out (their owner is unknown): a
// holder can go on writing its own pins while forget and prune, which read
// every pin (LoadPins), refuse to run.
func OwnPins(ctx context.Context, o Objects, owner string) ([]Pin, error) {
	all, _, err := listPins(ctx, o)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(p Pin) bool { return p.Owner != owner }), nil
}

// RemovePins removes every pin object of workspace ws (the lifecycle no
// longer holds anything of it) and returns how many.
func RemovePins(ctx context.Context, o Objects, ws string) (int, error) {
	all, _, err := listPins(ctx, o)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range all {
		if q.Workspace != ws {
			continue
		}
		if err := o.RemoveObject(ctx, crypt.KindPin, q.ID); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return n, fmt.Errorf("removing pins/%s: %w", q.ID, err)
		}
		n++
	}
	return n, nil
}

// Pins is the union of every pin object in a repository.
type Pins struct {
	Objects []Pin // every pin object, by workspace, then set time

	byID map[blob.ID][]string // snapshot -> why
	all  map[string][]string  // workspace -> why every snapshot of it is held
}

// LoadPins loads every pin object of the repository. All of them hold: a
// crash between SetPin's write and its removal leaves two pins of a
// workspace, and the union is the safe reading. A pin object that does not
// load is an error naming it: forget and prune must not run blind.
func LoadPins(ctx context.Context, o Objects) (Pins, error) {
	all, bad, err := listPins(ctx, o)
	if err != nil {
		return Pins{}, err
	}
	if len(bad) > 0 {
		return Pins{}, errors.Join(bad...)
	}
	ps := Pins{Objects: all, byID: map[blob.ID][]string{}, all: map[string][]string{}}
	for _, p := range all {
		for _, s := range p.Snapshots {
			why := cmp.Or(s.Why, "pinned by the lifecycle")
			if !slices.Contains(ps.byID[s.ID], why) {
				ps.byID[s.ID] = append(ps.byID[s.ID], why)
			}
		}
		if p.All {
			why := cmp.Or(p.AllWhy, "every snapshot of the workspace is pinned by the lifecycle")
			if !slices.Contains(ps.all[p.Workspace], why) {
				ps.all[p.Workspace] = append(ps.all[p.Workspace], why)
			}
		}
	}
	return ps, nil
}

// Held reports whether snapshot id of workspace ws is held, and why (the
// reasons of every pin that holds it, joined by "; "). A snapshot is held
// when any pin names its id (ids are unique, so whatever workspace the pin
// is for) or when a pin of ws holds all of ws's snapshots.
func (p Pins) Held(ws string, id blob.ID) (why string, held bool) {
	whys := append(slices.Clone(p.byID[id]), p.all[ws]...)
	if len(whys) == 0 {
		return "", false
	}
	return strings.Join(whys, "; "), true
}

// HoldsAll returns the workspaces whose every snapshot is held, sorted.
func (p Pins) HoldsAll() []string {
	out := make([]string, 0, len(p.all))
	for ws := range p.all {
		out = append(out, ws)
	}
	slices.Sort(out)
	return out
}

// Pinned returns every snapshot id some pin names, sorted.
func (p Pins) Pinned() []blob.ID {
	out := make([]blob.ID, 0, len(p.byID))
	for id := range p.byID {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

func listPins(ctx context.Context, o Objects) (all []Pin, bad []error, err error) {
	err = o.ListObjects(ctx, crypt.KindPin, func(id blob.ID) error {
		p, err := loadPin(ctx, o, id)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, backend.ErrNotFound) {
				return nil // replaced while we listed
			}
			bad = append(bad, fmt.Errorf("pins/%s does not load: %w; forget and prune refuse to run while a pin cannot be read, "+
				"since they cannot know what it holds (check the storage, and whether a newer lifeboat wrote it; a damaged pin "+
				"can be deleted once every running `lifeboat serve` has started again, since each rewrites the pins of its "+
				"workspaces when it starts)", id, err))
			return nil
		}
		all = append(all, p)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pins: %w", err)
	}
	slices.SortFunc(all, func(a, b Pin) int {
		return cmp.Or(cmp.Compare(a.Workspace, b.Workspace), a.Set.Compare(b.Set), bytes.Compare(a.ID[:], b.ID[:]))
	})
	return all, bad, nil
}

func loadPin(ctx context.Context, o Objects, id blob.ID) (Pin, error) {
	t, b, err := o.LoadObject(ctx, crypt.KindPin, id)
	if err != nil {
		return Pin{}, err
	}
	if t != blob.Workspace {
		return Pin{}, fmt.Errorf("sealed in the %s tier, not workspace", t)
	}
	var p Pin
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Pin{}, fmt.Errorf("does not decode: %w", err)
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return Pin{}, fmt.Errorf("%d bytes after the pin's JSON object", len(rest))
	}
	if err := blob.CheckTime("its time set", p.Set); err != nil {
		return Pin{}, err
	}
	if err := p.validate(); err != nil {
		return Pin{}, err
	}
	p.ID = id
	return p, nil
}
