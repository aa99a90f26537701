package prune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
)

// Two-phase prune (Options.DeleteAfter > 0) takes no exclusive lock, so
// captures run beside it, each without a lock. A run
//
//  1. reads the condemnation objects, before it lists the snapshots: those
//     condemned at least DeleteAfter ago (by this prune's clock) are ripe;
//  2. marks and plans as a one-phase prune does;
//  3. repacks, and condemns what it found unused and not condemned yet
//     (packs with nothing live, the repacked ones, unindexed ones) in a new
//     condemnation object: from then on no capture that begins reuses them;
//  4. deletes the ripe packs the plan still finds unused (rewriting the
//     index objects that list them first), after walking the snapshots
//     that appeared meanwhile; a ripe pack something uses is rescued;
//  5. removes the ripe condemnation objects, last.
//
// Why that is safe is in docs/guarantees.md (Concurrency): a capture
// that may have reused a condemned pack began before its condemnation was
// stored, so it stores its snapshot within its session limit (repo.Session)
// or not at all, and DeleteAfter is longer than that limit: the ripe
// pack's prune lists that snapshot.

// CondemnSlack bounds the time between a prune reading its clock for a
// condemnation and the object being stored; a prune stopped longer in
// between removes the object again and fails. DeleteAfter must exceed a
// capture's session limit plus this slack plus the clock difference
// between the hosts that prune and capture.
const CondemnSlack = 10 * time.Minute

// DefaultDeleteAfter is the margin of `lifeboat prune` and `serve`.
const DefaultDeleteAfter = 24 * time.Hour

// MinDeleteAfter is the smallest margin the CLI and serve accept: a
// capture's default session limit, CondemnSlack, and an hour of clock
// difference between hosts.
const MinDeleteAfter = repo.DefaultSessionLimit + CondemnSlack + time.Hour

// ErrCondemnSlow: a prune was stopped between reading its clock and
// storing its condemnation object for longer than CondemnSlack.
var ErrCondemnSlow = fmt.Errorf("prune was stopped for more than %s while it condemned packs; nothing was deleted, run it again", CondemnSlack)

// phases sorts the plan's packs for a two-phase run: which are deleted
// now, which are condemned, which wait for their margin. now was read
// before the snapshots were listed.
func (p *Plan) phases(conds []repo.StoredCondemnation, now time.Time, deleteAfter time.Duration) {
	ripe := map[blob.ID]bool{}
	waiting := map[blob.ID]bool{}
	for _, c := range conds {
		margin := max(c.DeleteAfter, deleteAfter)
		isRipe := now.Sub(c.Time) >= margin
		if isRipe {
			p.ripeObjects = append(p.ripeObjects, c.ID)
		}
		for _, id := range c.Packs {
			if isRipe {
				ripe[id] = true
			} else {
				waiting[id] = true
			}
		}
	}
	for id := range waiting {
		delete(ripe, id) // condemned again later: its newer margin holds
	}
	p.condemned = map[blob.ID]bool{}
	sortOut := func(list []PackInfo, repack bool) []PackInfo {
		kept := []PackInfo{} // [] in JSON, never null
		for _, pi := range list {
			switch {
			case ripe[pi.ID] && !repack:
				p.condemned[pi.ID] = true
				p.DeleteNow = append(p.DeleteNow, pi)
				kept = append(kept, pi)
			case waiting[pi.ID]:
				p.Waiting++
			default:
				p.Condemn = append(p.Condemn, pi.ID)
				kept = append(kept, pi)
			}
		}
		return kept
	}
	p.Delete = sortOut(p.Delete, false)
	p.Repack = sortOut(p.Repack, true)
	p.Unindexed = sortOut(p.Unindexed, false)
	p.repack = map[blob.ID]*PackInfo{}
	for i := range p.Repack {
		p.repack[p.Repack[i].ID] = &p.Repack[i]
	}
	p.BytesFreed = 0
	for _, pi := range p.DeleteNow {
		p.BytesFreed += pi.Size
	}
	for id := range ripe {
		if !p.condemned[id] {
			p.Rescue++
		}
	}
}

// executeTwoPhase is Execute for a two-phase plan.
func (p *Plan) executeTwoPhase(ctx context.Context, r *repo.Repository, src Source, o ExecOptions) (Stats, error) {
	var st Stats
	progress := func(s string) {
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	held := func() error {
		if o.Held != nil {
			return o.Held.Err()
		}
		return nil
	}
	if len(p.Repack) > 0 {
		progress("repack")
		if err := p.repackAll(ctx, r, &st); err != nil {
			return st, fmt.Errorf("repacking (nothing was deleted): %w", err)
		}
	}
	if len(p.Condemn) > 0 {
		progress("condemn")
		if err := held(); err != nil {
			return st, err
		}
		if err := p.condemnNow(ctx, r); err != nil {
			return st, err
		}
		st.PacksCondemned = len(p.Condemn)
	}
	progress("recheck")
	if _, err := r.SyncIndex(ctx); err != nil {
		return st, err
	}
	if o.ForgetDamaged && len(p.Damaged) > 0 {
		if err := p.checkHeld(ctx, r); err != nil { // a pin may hold one since the plan
			return st, err
		}
	}
	rescued, err := p.rescue(ctx, r, src, &st)
	if err != nil {
		return st, err
	}
	st.Rescued += p.Rescue
	gone, affected, err := p.replaceIndex(ctx, r, rescued, o.ForgetDamaged, held, progress, &st)
	if err != nil {
		return st, err
	}
	deleted := map[blob.ID]bool{}
	for _, pi := range p.DeleteNow {
		if !gone(pi.ID) {
			continue
		}
		if known, err := r.Index().HasPack(pi.ID); err != nil {
			return st, err
		} else if known && !slices.ContainsFunc(p.Delete, func(d PackInfo) bool { return d.ID == pi.ID }) {
			continue // unindexed when planned, indexed since: the next prune decides
		}
		if err := held(); err != nil {
			return st, err
		}
		if err := r.RemoveFile(ctx, backend.Handle{Type: backend.Pack, Name: pi.ID.String()}); err != nil {
			return st, err
		}
		st.PacksDeleted++
		st.BytesDeleted += pi.Size
		deleted[pi.ID] = true
	}
	progress("sync")
	if err := r.Index().Drop(affected, deleted); err != nil {
		return st, err
	}
	// The ripe condemnations go last: a capture that no longer sees one
	// syncs its index after, and finds the deleted packs gone from it.
	for _, id := range append(p.ripeObjects, p.damagedConds...) {
		if err := r.RemoveObject(ctx, crypt.KindCondemned, id); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return st, err
		}
		st.CondemnationsRemoved++
	}
	if err := r.RefreshCondemned(ctx); err != nil {
		return st, err
	}
	return st, nil
}

// condemnNow stores the condemnation of p.Condemn, taking the time just
// before; if storing took longer than CondemnSlack (the process was
// stopped), the object is removed again and the prune fails.
func (p *Plan) condemnNow(ctx context.Context, r *repo.Repository) error {
	slices.SortFunc(p.Condemn, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	t, mono := p.now(), time.Now()
	id, err := r.Condemn(ctx, t, p.deleteAfter, p.Condemn)
	if err != nil {
		return fmt.Errorf("condemning %d packs (nothing was deleted): %w", len(p.Condemn), err)
	}
	if p.now().Sub(t) > CondemnSlack || time.Since(mono) > CondemnSlack {
		if err := r.RemoveObject(context.WithoutCancel(ctx), crypt.KindCondemned, id); err != nil {
			return fmt.Errorf("%w; removing condemnation %s failed too: %w", ErrCondemnSlow, id.Short(), err)
		}
		return ErrCondemnSlow
	}
	return nil
}
