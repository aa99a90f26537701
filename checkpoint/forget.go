package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// HeldLastGood is why the lifecycle holds a workspace's last good
// checkpoint (in its pin, and in Retain).
const HeldLastGood = "last good checkpoint of the lifecycle"

// HeldPrefix starts the reason of a snapshot kept because it is held.
const HeldPrefix = "held: "

// ErrNoPolicy: forget was to apply stored policies, and the repository
// has none (and no default policy was given).
var ErrNoPolicy = errors.New("no retention policy is stored and none was given")

// ForgetOptions say what Forget applies.
type ForgetOptions struct {
	Workspace string        // "" = every workspace
	Policy    *prune.Policy // e.g. from flags; nil = each workspace's stored policy, else Default
	// Default is the policy of workspaces with no stored one (the
	// service's); nil = leave them alone (ForgetResult.Unmanaged).
	Default *prune.Policy
	DryRun  bool
	Now     time.Time // default time.Now()
	// Held are more snapshots to keep, with why, whatever the policy and
	// the pins say (Retain: the checkpoint the lifecycle promoted).
	Held map[blob.ID]string
	// Lock, when set, is the shared lock the caller holds: Forget
	// releases it after the plan, and the removals run under an exclusive
	// lock (taken with Exclusive's options) after the pins are read again
	// (RemovePlanned).
	Lock      *repo.Lock
	Exclusive repo.LockOptions
}

// ForgetResult is what Forget decided (and, unless DryRun, did).
type ForgetResult struct {
	// Decisions: by workspace (sorted), newest first within one.
	Decisions []prune.Decision
	Warnings  []string
	// Kept and Removed count snapshots; Removed the ones removed (with
	// DryRun, that would be). Snapshots of unmanaged workspaces count as kept.
	Kept, Removed int
	// Unmanaged are the workspaces left alone (no policy), sorted, with
	// the number of their snapshots in Left.
	Unmanaged []string
	Left      map[string]int
	// Unreadable are the snapshots whose manifest does not load: left alone.
	Unreadable map[blob.ID]error
	// Gone are the snapshots already removed by someone else (another
	// forget or a lifecycle's retention beside this one): listed, then
	// gone when their manifest was read, or gone when this forget came to
	// remove them. Neither is an error; a removed one still counts in
	// Removed. Sorted.
	Gone []blob.ID
}

// Forget applies a retention policy to the snapshots of each workspace (or
// of o.Workspace) and removes the ones it does not keep (PlanForget, then
// RemoveSnapshot each). A snapshot already gone is fine: another forget
// beside this one (both hold shared locks) may have removed it; it is
// listed in ForgetResult.Gone. Only
// snapshot objects are removed; prune frees their data. On an error,
// snapshots before it may have been removed.
func Forget(ctx context.Context, r *repo.Repository, o ForgetOptions) (ForgetResult, error) {
	res, err := PlanForget(ctx, r, o)
	if err != nil || o.DryRun {
		return res, err
	}
	return res, RemovePlanned(ctx, r, o.Lock, o.Exclusive, &res)
}

// RemovePlanned removes the snapshots a plan (PlanForget) does not keep.
// With l, the shared lock the caller planned under, it releases l, takes
// an exclusive lock (with lo) and reads the pins again under it: a pin is
// written under a shared lock, so one written since the plan read the
// pins (a promotion that named a new checkpoint) is seen, and the
// snapshot it holds is kept, its decision turned to keep with the hold's
// reason. It never waits for the exclusive lock while holding l: two
// processes that each held a shared lock and waited for an exclusive one
// would wait for each other until their lock waits ran out (two servers'
// scheduled forgets did). Captures elsewhere wait only while the snapshot
// objects are removed. A snapshot already gone is not an error: it is
// added to res.Gone.
func RemovePlanned(ctx context.Context, r *repo.Repository, l *repo.Lock, lo repo.LockOptions, res *ForgetResult) error {
	if res.Removed == 0 {
		return nil
	}
	remove := func(l *repo.Lock) error {
		pins, err := prune.LoadPins(ctx, r)
		if err != nil {
			return err
		}
		for i := range res.Decisions {
			d := &res.Decisions[i]
			if d.Keep {
				continue
			}
			if why, held := pins.Held(d.Snapshot.Workspace, d.Snapshot.ID); held {
				d.Keep, d.Reasons = true, append(d.Reasons, HeldPrefix+why)
				res.Kept++
				res.Removed--
				continue
			}
			gone, err := RemoveSnapshot(ctx, r, l, d.Snapshot.ID)
			if err != nil {
				return err
			}
			if gone {
				res.addGone(d.Snapshot.ID)
			}
		}
		return nil
	}
	if l == nil {
		return remove(nil)
	}
	if err := l.Unlock(ctx); err != nil {
		return err
	}
	x, err := r.Lock(ctx, repo.LockExclusive, lo)
	if err != nil {
		return err
	}
	defer func() { _ = x.Unlock(context.WithoutCancel(ctx)) }()
	if err := remove(x); err != nil {
		return err
	}
	return x.Err()
}

// PlanForget decides what Forget would do and changes nothing.
//
// Each workspace gets o.Policy, else its stored policy, else o.Default,
// else it is left alone. prune.Apply keeps what the policy keeps and the
// newest complete snapshot (the last good root). Then every snapshot a
// pin holds (prune.LoadPins: the lifecycle's last good checkpoint, those
// an open recovery names; a pin that does not load is an error) or that
// o.Held names is kept too, with the reason HeldPrefix + why. The pins are
// read last, after the snapshots, so a pin the lifecycle set for a
// checkpoint it had just written is seen.
func PlanForget(ctx context.Context, r *repo.Repository, o ForgetOptions) (ForgetResult, error) {
	res := ForgetResult{Warnings: []string{}, Left: map[string]int{}}
	for _, p := range []*prune.Policy{o.Policy, o.Default} {
		if p != nil {
			if err := p.Validate(); err != nil {
				return res, err
			}
		}
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	// The policies first: with none, the snapshots are not read (a
	// server's retention runs after every capture, and without a policy
	// nothing bounds their number).
	stored := map[string]prune.StoredPolicy{}
	if o.Policy == nil {
		var err error
		if stored, err = prune.Policies(ctx, r); err != nil {
			return res, err
		}
		if len(stored) == 0 && o.Default == nil {
			return res, ErrNoPolicy
		}
	}
	snaps, bad, err := snapshot.List(ctx, r, o.Workspace)
	if err != nil {
		return res, err
	}
	res.Unreadable = map[blob.ID]error{}
	for id, e := range bad {
		if errors.Is(e, backend.ErrNotFound) {
			res.addGone(id) // listed, then removed before it was read
		} else {
			res.Unreadable[id] = e
		}
	}
	in := make([]prune.Snapshot, len(snaps))
	for i, m := range snaps {
		in[i] = prune.Snapshot{ID: m.ID, Workspace: m.Workspace, Time: m.Time, Complete: m.Complete, Tags: m.Tags}
	}
	workspaces, by := prune.Group(in)
	for _, ws := range workspaces {
		pol := o.Policy
		if pol == nil {
			if sp, ok := stored[ws]; ok {
				pol = &sp.Policy
			} else {
				pol = o.Default
			}
		}
		if pol == nil {
			res.Unmanaged = append(res.Unmanaged, ws)
			res.Left[ws] = len(by[ws])
			res.Kept += len(by[ws])
			continue
		}
		a := prune.Apply(*pol, ws, by[ws], now)
		res.Warnings = append(res.Warnings, a.Warnings...)
		res.Decisions = append(res.Decisions, a.Decisions...)
	}
	if len(res.Decisions) > 0 {
		pins, err := prune.LoadPins(ctx, r)
		if err != nil {
			return res, fmt.Errorf("forget removes nothing while it cannot read every pin: %w", err)
		}
		for i := range res.Decisions {
			d := &res.Decisions[i]
			var whys []string
			if why, ok := pins.Held(d.Snapshot.Workspace, d.Snapshot.ID); ok {
				whys = append(whys, why)
			}
			if why, ok := o.Held[d.Snapshot.ID]; ok && !slices.Contains(whys, why) {
				whys = append(whys, why)
			}
			if len(whys) > 0 {
				d.Keep = true
				d.Reasons = append(d.Reasons, HeldPrefix+strings.Join(whys, "; "))
			}
		}
	}
	for _, d := range res.Decisions {
		if d.Keep {
			res.Kept++
		} else {
			res.Removed++
		}
	}
	return res, nil
}

// RemoveSnapshot removes one snapshot object, checking l (when set) first.
// A snapshot already gone is not an error: gone reports it.
func RemoveSnapshot(ctx context.Context, r *repo.Repository, l *repo.Lock, id blob.ID) (gone bool, err error) {
	if l != nil {
		if err := l.Err(); err != nil {
			return false, err
		}
	}
	err = r.RemoveObject(ctx, crypt.KindSnapshot, id)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("removing snapshot %s: %w", id.Short(), err)
	}
	return false, nil
}

// addGone records id as already removed, keeping Gone sorted.
func (res *ForgetResult) addGone(id blob.ID) {
	i, found := slices.BinarySearchFunc(res.Gone, id, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	if !found {
		res.Gone = slices.Insert(res.Gone, i, id)
	}
}
