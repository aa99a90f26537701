package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
)

// Condemnation is the plaintext of a condemnation object (kind 7,
// condemned/<id>, sealed in the workspace tier): packs a prune will
// delete once DeleteAfter has passed since Time, unless a snapshot stored
// by then needs them. From the moment it is stored, captures do not reuse
// what these packs hold (BeginSession); the prune that deletes them
// removes the object last. See docs/guarantees.md (Concurrency).
type Condemnation struct {
	Version int `json:"version"`
	// Time is when the prune condemned the packs, by its clock, taken
	// before the object was stored.
	Time time.Time `json:"time"`
	// DeleteAfter is the safety margin the condemning prune used: the
	// packs are deleted no sooner than Time + DeleteAfter (or a later
	// prune's larger margin).
	DeleteAfter time.Duration `json:"delete_after"`
	Host        string        `json:"host,omitempty"`
	Packs       []blob.ID     `json:"packs"`
}

// StoredCondemnation is a condemnation object with its id.
type StoredCondemnation struct {
	ID blob.ID
	Condemnation
}

// DecodeCondemnation decodes and checks a condemnation object's plaintext.
func DecodeCondemnation(b []byte) (Condemnation, error) {
	var c Condemnation
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("condemnation: %w", err)
	}
	if dec.More() {
		return c, errors.New("condemnation: data after the object")
	}
	switch {
	case c.Version != 1:
		return c, fmt.Errorf("condemnation: version %d, want 1", c.Version)
	case c.Time.IsZero():
		return c, errors.New("condemnation: no time")
	case c.DeleteAfter < 0:
		return c, fmt.Errorf("condemnation: negative delete_after %v", c.DeleteAfter)
	}
	for _, id := range c.Packs {
		if id.IsNull() {
			return c, errors.New("condemnation: null pack id")
		}
	}
	return c, nil
}

// Condemn stores a condemnation object for packs, condemned at t with
// margin deleteAfter, and marks them condemned in the local index at once.
func (r *Repository) Condemn(ctx context.Context, t time.Time, deleteAfter time.Duration, packs []blob.ID) (blob.ID, error) {
	host, _ := os.Hostname()
	c := Condemnation{Version: 1, Time: t.UTC(), DeleteAfter: deleteAfter, Host: host, Packs: packs}
	b, err := json.Marshal(c)
	if err != nil {
		return blob.ID{}, err
	}
	id, err := r.SaveObject(ctx, crypt.KindCondemned, blob.Workspace, b)
	if err != nil {
		return id, err
	}
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	r.condemned[id] = condemnedObject{Condemnation: c}
	set := map[blob.ID]bool{}
	for _, p := range packs {
		set[p] = true
	}
	_, err = r.idx.SetCondemned(set, false)
	return id, err
}

// condemnedObject is a condemnation object as a refresh loaded it:
// damaged (with its error, condemning nothing) or not.
type condemnedObject struct {
	Condemnation
	damaged error
}

// Condemnations refreshes the condemned packs (as BeginSession does) and
// returns the condemnation objects it found, by id. One that does not
// load or decode is returned in damaged with its error; nobody acts on it
// (captures do not know what it condemns, so no prune deletes its packs).
func (r *Repository) Condemnations(ctx context.Context) (list []StoredCondemnation, damaged map[blob.ID]error, err error) {
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	if err := r.refreshCondemned(ctx); err != nil {
		return nil, nil, err
	}
	damaged = map[blob.ID]error{}
	for id, c := range r.condemned {
		if c.damaged != nil {
			damaged[id] = c.damaged
		} else {
			list = append(list, StoredCondemnation{id, c.Condemnation})
		}
	}
	slices.SortFunc(list, func(a, b StoredCondemnation) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return list, damaged, nil
}

// loadCondemnation loads and decodes condemnation object id. One that is
// corrupt, sealed in a tier the key cannot open, or does not decode is
// damaged (err nil): prune and captures alike treat it as condemning
// nothing, and no prune deletes what it names. Any other failure (the
// object is gone, a read failed) is err.
func (r *Repository) loadCondemnation(ctx context.Context, id blob.ID) (c Condemnation, damaged, err error) {
	_, b, err := r.LoadObject(ctx, crypt.KindCondemned, id)
	if errors.Is(err, ErrCorrupt) || errors.Is(err, crypt.ErrTierLocked) || errors.Is(err, crypt.ErrAuth) {
		return c, err, nil
	}
	if err != nil {
		return c, nil, err
	}
	if c, err = DecodeCondemnation(b); err != nil {
		return Condemnation{}, err, nil
	}
	return c, nil, nil
}

// refreshCondemned lists the condemnation objects, loads those it has not
// seen, syncs the local index, and then makes the index's condemned packs
// exactly those the objects name. The order matters: a pack stops being
// condemned only when its object is gone, which a prune removes after the
// index objects that list the pack's deleted places, so the sync that
// follows the listing has dropped those places already. r.gcMu held.
func (r *Repository) refreshCondemned(ctx context.Context) error {
	present := map[blob.ID]bool{}
	if err := r.ListObjects(ctx, crypt.KindCondemned, func(id blob.ID) error { present[id] = true; return nil }); err != nil {
		return fmt.Errorf("listing condemnation objects: %w", err)
	}
	for id := range present {
		if _, ok := r.condemned[id]; ok {
			continue
		}
		// A damaged one condemns nothing (loadCondemnation); a read that
		// fails fails the session rather than miss what it condemns.
		c, bad, err := r.loadCondemnation(ctx, id)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			delete(present, id)
			continue
		case err != nil:
			return fmt.Errorf("loading condemnation %s: %w", id.Short(), err)
		}
		r.condemned[id] = condemnedObject{c, bad}
	}
	if _, err := r.SyncIndex(ctx); err != nil {
		return err
	}
	for id := range r.condemned {
		if !present[id] {
			delete(r.condemned, id)
		}
	}
	return r.markCondemned()
}

// markCondemned sets the local index's condemned packs to those of
// r.condemned. r.gcMu held.
func (r *Repository) markCondemned() error {
	packs := map[blob.ID]bool{}
	for _, c := range r.condemned {
		for _, id := range c.Packs {
			packs[id] = true
		}
	}
	_, err := r.idx.SetCondemned(packs, true)
	return err
}
