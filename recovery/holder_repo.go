package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// RepoHolds is the real Holder: each workspace's hold is a pin object in
// the repository (package prune), which `lifeboat forget`, the lifecycle's
// retention and prune honour in any process. Its pins carry Owner (the
// state store's id; New sets it when empty), and it replaces or removes
// only its own: another state store on the same repository that uses the
// same workspace id keeps its holds. It reads its own pins once, then keeps
// track of the ones it writes, so a hold costs one write and the removal
// of the pin it replaces, however many workspaces there are; a hold that
// is already what its pin says is only checked to be still there.
type RepoHolds struct {
	Repo  *repo.Repository
	Owner string
	Now   func() time.Time // default time.Now

	mu     sync.Mutex
	loaded bool
	pins   map[string][]prune.Pin // by workspace: this owner's pin objects
}

var errNoOwner = errors.New("repository holds need an owner (the state store's id)")

// load reads this owner's pins once. h.mu held.
func (h *RepoHolds) load(ctx context.Context) error {
	if h.Owner == "" {
		return errNoOwner
	}
	if h.loaded {
		return nil
	}
	own, err := prune.OwnPins(ctx, h.Repo, h.Owner)
	if err != nil {
		return err
	}
	h.pins = map[string][]prune.Pin{}
	for _, p := range own {
		h.pins[p.Workspace] = append(h.pins[p.Workspace], p)
	}
	h.loaded = true
	return nil
}

// Refresh implements Holder: this owner's pins are read again from the
// repository, so a pin removed behind this holder's back (by hand, or
// replaced by another server of the same store) is no longer taken for
// written, and one another server wrote is known.
func (h *RepoHolds) Refresh(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loaded = false
	return h.load(ctx)
}

// Hold implements Holder.
func (h *RepoHolds) Hold(ctx context.Context, hs HoldSet) error {
	pin := prune.Pin{Workspace: hs.Workspace, Owner: h.Owner, All: hs.All, AllWhy: hs.AllWhy}
	for id, why := range hs.Snapshots {
		bid, err := blob.ParseID(id)
		if err != nil {
			return fmt.Errorf("hold of %s: snapshot %q: %w", hs.Workspace, id, err)
		}
		pin.Snapshots = append(pin.Snapshots, prune.PinnedSnapshot{ID: bid, Why: why})
	}
	slices.SortFunc(pin.Snapshots, func(a, b prune.PinnedSnapshot) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.load(ctx); err != nil {
		return err
	}
	old := h.pins[hs.Workspace]
	if len(pin.Snapshots) == 0 && !pin.All {
		// Nothing to hold (a workspace not captured yet): no pin, and
		// this owner's earlier ones of it go.
		return h.release(ctx, hs.Workspace)
	}
	if same := sameAs(old, pin); same >= 0 {
		// Unchanged: written already, unless something removed it since
		// (with the repository's objects kept loaded, only a Refresh
		// finds that out). Other pins of this owner for ws (another
		// server's of the same store, a crash's leftover) go: every
		// server keeps the same one, so they do not take turns writing
		// new ones.
		kept := old[same]
		_, _, err := h.Repo.LoadObject(ctx, crypt.KindPin, kept.ID)
		if err != nil && !errors.Is(err, backend.ErrNotFound) {
			return err
		}
		if err == nil {
			for _, p := range old {
				if p.ID == kept.ID {
					continue
				}
				if err := h.Repo.RemoveObject(ctx, crypt.KindPin, p.ID); err != nil && !errors.Is(err, backend.ErrNotFound) {
					return fmt.Errorf("removing pins/%s of workspace %s: %w", p.ID, hs.Workspace, err)
				}
			}
			h.pins[hs.Workspace] = []prune.Pin{kept}
			return nil
		}
		old = slices.Delete(slices.Clone(old), same, same+1)
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	ids := make([]blob.ID, len(old))
	for i, p := range old {
		ids[i] = p.ID
	}
	got, err := prune.ReplacePin(ctx, h.Repo, pin, now(), ids)
	switch {
	case got.ID == (blob.ID{}): // not written: the old pins stand
	case err != nil: // written, but the old ones may remain
		h.pins[hs.Workspace] = append([]prune.Pin{got}, old...)
	default:
		h.pins[hs.Workspace] = []prune.Pin{got}
	}
	return err
}

// sameAs is the index in pins of the pin, of those that hold what p
// holds, with the smallest id (so every server picks the same one), or -1.
func sameAs(pins []prune.Pin, p prune.Pin) int {
	at := -1
	for i, q := range pins {
		if samePin(q, p) && (at < 0 || bytes.Compare(q.ID[:], pins[at].ID[:]) < 0) {
			at = i
		}
	}
	return at
}

// samePin reports whether two pins hold the same snapshots for the same
// reasons.
func samePin(a, b prune.Pin) bool {
	return a.Workspace == b.Workspace && a.Owner == b.Owner && a.All == b.All && a.AllWhy == b.AllWhy &&
		slices.EqualFunc(a.Snapshots, b.Snapshots, func(x, y prune.PinnedSnapshot) bool { return x == y })
}

// Release implements Holder: this owner's pins of ws.
func (h *RepoHolds) Release(ctx context.Context, ws string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.load(ctx); err != nil {
		return err
	}
	return h.release(ctx, ws)
}

// release removes this owner's pins of ws. h.mu held.
func (h *RepoHolds) release(ctx context.Context, ws string) error {
	for _, p := range h.pins[ws] {
		if err := h.Repo.RemoveObject(ctx, crypt.KindPin, p.ID); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("removing pins/%s of workspace %s: %w", p.ID, ws, err)
		}
	}
	delete(h.pins, ws)
	return nil
}

// Retain implements Holder: this owner's pins of workspaces keep says no
// to (removed from the state store while their pin could not be removed)
// are removed.
func (h *RepoHolds) Retain(ctx context.Context, keep func(ws string) bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.load(ctx); err != nil {
		return err
	}
	var errs []error
	for ws := range h.pins {
		if !keep(ws) {
			errs = append(errs, h.release(ctx, ws))
		}
	}
	return errors.Join(errs...)
}

// Present implements Holder: the snapshot's manifest is still stored.
func (h *RepoHolds) Present(ctx context.Context, id string) error {
	bid, err := blob.ParseID(id)
	if err != nil {
		return err
	}
	// From storage, never from the objects this process keeps loaded
	// (repo.Options.KeepObjects): the capture's verification loaded it,
	// and a forget in another server may have removed it since.
	h.Repo.Unkeep(crypt.KindSnapshot, bid)
	if _, _, err := h.Repo.LoadObject(ctx, crypt.KindSnapshot, bid); err != nil {
		return fmt.Errorf("snapshot %s was removed before its hold was recorded (a forget in another process?): %w", bid.Short(), err)
	}
	return nil
}

// ForgetAll implements Holder: every snapshot of ws, readable or not (a
// manifest that does not load names no workspace and is left alone),
// except those another owner's pin holds. Every pin must load.
func (h *RepoHolds) ForgetAll(ctx context.Context, ws string) (int, error) {
	pins, err := prune.LoadPins(ctx, h.Repo)
	if err != nil {
		return 0, err
	}
	var others []prune.Pin
	for _, p := range pins.Objects {
		if p.Owner != h.Owner {
			others = append(others, p)
		}
	}
	snaps, _, err := snapshot.List(ctx, h.Repo, ws)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range snaps {
		if heldBy(others, ws, m.ID) {
			continue
		}
		if err := h.Repo.RemoveObject(ctx, crypt.KindSnapshot, m.ID); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return n, fmt.Errorf("removing snapshot %s: %w", m.ID.Short(), err)
		}
		n++
	}
	return n, nil
}

// heldBy reports whether one of pins holds snapshot id of workspace ws.
func heldBy(pins []prune.Pin, ws string, id blob.ID) bool {
	for _, p := range pins {
		if p.Workspace == ws && p.All {
			return true
		}
		for _, s := range p.Snapshots {
			if s.ID == id {
				return true
			}
		}
	}
	return false
}
