package prune

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/repo"
)

// Source tells prune which snapshots exist and what each reaches.
// snapshot.PruneSource is the one over a repository (prune does not
// import snapshot/); tests pass fakes.
type Source interface {
	// Snapshots lists the ids of every stored snapshot.
	Snapshots(ctx context.Context) ([]blob.ID, error)
	// Reach reports every blob snapshot id reaches to m (see
	// snapshot.Reach). A snapshot that is damaged fails with an error
	// wrapping repo.ErrDamaged, after marking all it could still read. A
	// snapshot removed since Snapshots listed it reaches nothing (nil).
	Reach(ctx context.Context, id blob.ID, m repo.Marker) error
}

// Options tune planning.
type Options struct {
	// MaxUnused is the fraction (0..1) of the repository that may stay
	// unused after prune; packs with the most unused space are repacked
	// until the rest is within it. Default 0.05; 1 repacks nothing.
	MaxUnused float64
	// ForgetDamaged forgets damaged snapshots instead of refusing.
	ForgetDamaged bool
	// TempDir holds the live set and tree set, in a directory
	// lifeboat-prune-* that Close removes (or, if the prune is killed,
	// the next prune with the same TempDir); default os.TempDir().
	TempDir string
	// RunKeys is how many live-set keys are sorted in memory at a time (tests).
	RunKeys int
	// Tiers are the tiers whose blobs the Source reports; packs of other
	// tiers are never deleted or repacked. Default: the workspace tier
	// only. The CLI passes the tiers the key unlocks: snapshot.Reach marks
	// sensitive blobs only with a key that has that tier, so a
	// workspace-only key's prune leaves every sensitive pack alone.
	Tiers []blob.Tier
	// DeleteAfter, when above zero, makes the prune two-phase (condemn.go):
	// it deletes only packs condemned at least this long ago (by Now), and
	// condemns what it finds unused now; it takes no exclusive lock, and
	// captures run beside it. It must exceed every capture's session
	// limit (repo.DefaultSessionLimit) plus CondemnSlack plus the clock
	// difference between hosts. Zero: one-phase, deleting at once under
	// the exclusive lock (ExecOptions.Lock), which lock-free captures do
	// not respect: only when nothing captures.
	DeleteAfter time.Duration
	// Now is the clock of a two-phase prune; default time.Now.
	Now func() time.Time
}

// PackInfo is one pack the plan acts on.
type PackInfo struct {
	ID        blob.ID   `json:"id"`
	Tier      blob.Tier `json:"-"`
	Size      uint64    `json:"size"`
	Blobs     int       `json:"blobs"`
	LiveBlobs int       `json:"live_blobs"`
	LiveBytes uint64    `json:"live_bytes"` // sealed bytes of the live blobs
	DeadBytes uint64    `json:"dead_bytes"` // sealed bytes of the blobs nothing uses
}

// DamagedSnapshot names a snapshot prune could not walk.
type DamagedSnapshot struct {
	ID    blob.ID `json:"id"`
	Error string  `json:"error"`
	// Workspace is the snapshot's workspace when its manifest still opens.
	Workspace string `json:"-"`
	// Held says why a pin holds the snapshot (LoadPins); such a snapshot is
	// never forgotten, so the plan refuses even with ForgetDamaged.
	Held string `json:"-"`
}

// Plan is what a prune will do. PlanPrune makes it without changing
// anything; Execute carries out exactly this plan (checking, under the
// exclusive lock, for snapshots that appeared since).
type Plan struct {
	Snapshots    int               `json:"snapshots"` // snapshots marked
	Damaged      []DamagedSnapshot `json:"damaged"`   // forgotten when ForgetDamaged, else the plan refuses
	Packs        int               `json:"packs"`     // indexed packs
	Blobs        int               `json:"blobs"`     // indexed blobs
	LiveBlobs    int               `json:"live_blobs"`
	TotalBytes   uint64            `json:"total_bytes"`  // sizes of indexed packs
	UnusedBytes  uint64            `json:"unused_bytes"` // of that, not used by a kept snapshot (whole dead packs, dead blobs in others)
	Delete       []PackInfo        `json:"delete"`       // packs with nothing live
	Repack       []PackInfo        `json:"repack"`       // live blobs copied to new packs, then deleted
	Unindexed    []PackInfo        `json:"unindexed"`    // stored packs no index lists (left by interrupted saves): deleted
	IndexObjects int               `json:"index_objects"`
	// Two-phase only: packs condemned now (their deletion waits for
	// DeleteAfter), packs condemned at least DeleteAfter ago deleted now,
	// packs condemned earlier that still wait, and ripe packs a snapshot
	// uses again (rescued: kept, and usable again).
	Condemn        []blob.ID  `json:"condemn,omitempty"`
	DeleteNow      []PackInfo `json:"delete_now,omitempty"`
	Waiting        int        `json:"condemned_waiting,omitempty"`
	Rescue         int        `json:"rescue,omitempty"`
	TwoPhase       bool       `json:"two_phase,omitempty"`
	BytesFreed     uint64     `json:"bytes_freed"`     // pack bytes deleted minus bytes rewritten
	BytesRewritten uint64     `json:"bytes_rewritten"` // live bytes copied into new packs
	UnusedAfter    uint64     `json:"unused_after"`    // dead blob bytes left in kept packs

	oldObjects map[blob.ID]blob.Tier // applied index objects the plan saw
	marked     map[blob.ID]bool      // snapshots the live set covers
	dir        string                // scratch dir of live and tree sets (scratch.go)
	lock       *os.File              // flock on dir's lock file while the plan lives
	live       *liveSet
	trees      *treeSet
	condemned  map[blob.ID]bool // packs to delete or repack
	repack     map[blob.ID]*PackInfo
	runKeys    int

	// Two-phase: the ripe condemnation objects (removed at the end), the
	// ones that do not decode (removed too: nobody acts on them), the
	// clock and the margin.
	ripeObjects  []blob.ID
	damagedConds []blob.ID
	now          func() time.Time
	deleteAfter  time.Duration
}

// Nothing reports whether the plan deletes and rewrites nothing.
func (p *Plan) Nothing() bool {
	return len(p.Delete) == 0 && len(p.Repack) == 0 && len(p.Unindexed) == 0 && len(p.Damaged) == 0 &&
		len(p.ripeObjects) == 0 && len(p.damagedConds) == 0
}

// Close removes the plan's temporary files.
func (p *Plan) Close() {
	if p.trees != nil {
		_ = p.trees.Close()
	}
	if p.live != nil {
		p.live.Remove()
	}
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
	if p.lock != nil {
		_ = p.lock.Close()
	}
}

// PlanPrune marks every blob reachable from the repository's snapshots
// and decides which packs to delete and which to repack. It changes
// nothing. With a damaged snapshot and no ForgetDamaged it returns the
// plan and an error wrapping repo.ErrDamaged naming them; so it does, even with
// ForgetDamaged, when a pin holds a damaged snapshot (see checkHeld). The
// caller must Close the plan.
func PlanPrune(ctx context.Context, r *repo.Repository, src Source, o Options) (*Plan, error) {
	if o.MaxUnused == 0 {
		o.MaxUnused = 0.05
	}
	if o.MaxUnused < 0 || o.MaxUnused > 1 {
		return nil, fmt.Errorf("max unused %v is not between 0 and 1", o.MaxUnused)
	}
	for _, t := range blob.Tiers {
		if _, err := r.TierKeys(t); err != nil {
			return nil, fmt.Errorf("prune needs a key that unlocks every tier (it must read every pack to know what is live): %w", err)
		}
	}
	// Snapshots first, then the index: a capture saves its index objects
	// before its manifest, so every snapshot listed here has its blobs in
	// the index synced next. (The other order could list a snapshot whose
	// index object arrived after the sync, and call it damaged.) Snapshots
	// that appear later are walked under the exclusive lock (Execute).
	// Two-phase: the condemnations and the clock before the snapshots, so
	// that every snapshot stored before a ripe condemnation's margin
	// ended is listed.
	var conds []repo.StoredCondemnation
	var badConds map[blob.ID]error
	var now time.Time
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DeleteAfter > 0 {
		var err error
		if conds, badConds, err = r.Condemnations(ctx); err != nil {
			return nil, err
		}
		now = o.Now()
	}
	ids, err := src.Snapshots(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	if _, err := r.SyncIndex(ctx); err != nil {
		return nil, err
	}
	if d := r.DamagedIndex(); len(d) > 0 {
		return nil, fmt.Errorf("%w: index object %s (and %d more) is damaged; run `lifeboat repair index` before prune", repo.ErrCorrupt, d[0], len(d)-1)
	}
	dir, lock, err := makeScratch(o.TempDir)
	if err != nil {
		return nil, err
	}
	p := &Plan{Damaged: []DamagedSnapshot{}, Delete: []PackInfo{}, Repack: []PackInfo{}, Unindexed: []PackInfo{},
		oldObjects: map[blob.ID]blob.Tier{}, marked: map[blob.ID]bool{}, dir: dir, lock: lock,
		condemned: map[blob.ID]bool{}, repack: map[blob.ID]*PackInfo{}, runKeys: cmp.Or(o.RunKeys, defaultRunKeys)}
	p.live = newLiveSet(dir, p.runKeys)
	if p.trees, err = newTreeSet(dir); err != nil {
		p.Close()
		return nil, err
	}
	// The objects the index holds now are the ones a rewrite replaces.
	err = r.Index().ForEachObject(func(id blob.ID, t blob.Tier, s index.ObjectState) error {
		if s != index.ObjectApplied {
			return fmt.Errorf("index object %s is not fully in the local index (state %d); run prune again", id.Short(), s)
		}
		p.oldObjects[id] = t
		return nil
	})
	if err == nil {
		err = p.mark(ctx, src, ids)
	}
	if err == nil {
		tiers := o.Tiers
		if len(tiers) == 0 {
			tiers = []blob.Tier{blob.Workspace}
		}
		err = p.plan(ctx, r, o.MaxUnused, tiers)
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	p.IndexObjects = len(p.oldObjects)
	if o.DeleteAfter > 0 {
		p.TwoPhase, p.now, p.deleteAfter = true, o.Now, o.DeleteAfter
		for id := range badConds {
			p.damagedConds = append(p.damagedConds, id)
		}
		p.phases(conds, now, o.DeleteAfter)
	}
	if len(p.Damaged) > 0 {
		if err := p.checkHeld(ctx, r); err != nil {
			return p, err
		}
	}
	if len(p.Damaged) > 0 && !o.ForgetDamaged {
		names := make([]string, len(p.Damaged))
		for i, d := range p.Damaged {
			names[i] = d.ID.String() + " (" + d.Error + ")"
		}
		return p, fmt.Errorf("%w: refusing to delete anything while a snapshot is damaged: %s; run `lifeboat check`, or `lifeboat prune --forget-damaged` to forget these snapshots",
			repo.ErrDamaged, strings.Join(names, "; "))
	}
	return p, nil
}

// mark walks the snapshots ids not yet marked into the live set,
// markWalkers at a time: from object storage, each snapshot's manifest and
// first listings are requests the walk waits for, so one walk at a time
// spent most of its time waiting. Damaged snapshots are listed in the
// order of ids; any other failure stops every walk and is returned.
func (p *Plan) mark(ctx context.Context, src Source, ids []blob.ID) error {
	var todo []blob.ID
	listed := map[blob.ID]bool{} // a listing may name an id twice
	for _, id := range ids {
		if !p.marked[id] && !listed[id] {
			listed[id] = true
			todo = append(todo, id)
		}
	}
	m := &repo.LockedMarker{M: &marker{live: p.live, trees: p.trees}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(todo))
	var failed error // the first failure that is not damage
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(todo), markWalkers) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(todo) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				err := src.Reach(ctx, todo[i], m)
				if err != nil && !errors.Is(err, repo.ErrDamaged) {
					mu.Lock()
					if failed == nil {
						failed = err
					}
					mu.Unlock()
					cancel()
					return
				}
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return failed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, id := range todo {
		if errs[i] != nil {
			p.Damaged = append(p.Damaged, DamagedSnapshot{ID: id, Error: errs[i].Error()})
		} else {
			p.Snapshots++
		}
		p.marked[id] = true
	}
	return nil
}

// markWalkers is how many snapshots mark walks at once.
const markWalkers = 4

// packStat accumulates one pack's blobs during the merge.
type packStat struct {
	tier      blob.Tier
	size      uint64
	blobs     int
	liveBlobs int
	liveBytes uint64
	deadBytes uint64
	// entries and entryBytes are what the index objects list for the
	// pack; entries the blobs bucket maps elsewhere are duplicates.
	entries    int
	entryBytes uint64
}

// plan merges the sorted live set with the index (both in tier, type, id
// order) and sorts the packs into keep, delete and repack.
func (p *Plan) plan(ctx context.Context, r *repo.Repository, maxUnused float64, tiers []blob.Tier) error {
	stats := map[blob.ID]*packStat{}
	err := r.Index().ForEachPackStats(func(ps index.PackStats) error {
		stats[ps.ID] = &packStat{tier: ps.Tier, size: uint64(ps.Size), entries: int(ps.Entries), entryBytes: ps.EntryBytes}
		return nil
	})
	if err != nil {
		return err
	}
	err = p.mergeIndex(r, func(loc index.Location, k key, live bool) error {
		st := stats[loc.Pack]
		if st == nil {
			return fmt.Errorf("%w: local index lists blob %s in pack %s it does not know", index.ErrCorrupt, loc.ID.Short(), loc.Pack.Short())
		}
		st.blobs++
		p.Blobs++
		if live {
			st.liveBlobs++
			st.liveBytes += uint64(loc.Length)
			p.LiveBlobs++
		} else {
			st.deadBytes += uint64(loc.Length)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var partial []PackInfo
	var liveTotal uint64
	for id, st := range stats {
		if !slices.Contains(tiers, st.tier) {
			p.Packs++
			p.TotalBytes += st.size
			continue // the Source does not mark this tier: keep it all
		}
		if st.entries > st.blobs && st.entryBytes > st.liveBytes+st.deadBytes {
			// Duplicates: copies of blobs the index uses from another pack.
			st.deadBytes += st.entryBytes - st.liveBytes - st.deadBytes
		}
		pi := PackInfo{ID: id, Tier: st.tier, Size: st.size, Blobs: st.blobs, LiveBlobs: st.liveBlobs, LiveBytes: st.liveBytes, DeadBytes: st.deadBytes}
		p.Packs++
		p.TotalBytes += st.size
		liveTotal += st.liveBytes
		switch {
		case st.liveBlobs == 0:
			p.Delete = append(p.Delete, pi)
			p.UnusedBytes += st.size
		case st.deadBytes > 0:
			partial = append(partial, pi)
			p.UnusedBytes += st.deadBytes
		}
	}
	// Repack the emptiest packs first until what stays unused is within
	// maxUnused of what stays stored.
	slices.SortFunc(partial, func(a, b PackInfo) int {
		fa, fb := float64(a.LiveBytes)/float64(a.LiveBytes+a.DeadBytes), float64(b.LiveBytes)/float64(b.LiveBytes+b.DeadBytes)
		return cmp.Or(cmp.Compare(fa, fb), bytes.Compare(a.ID[:], b.ID[:]))
	})
	var unused uint64
	for _, pi := range partial {
		unused += pi.DeadBytes
	}
	for _, pi := range partial {
		if float64(unused) <= maxUnused*float64(liveTotal+unused) {
			break
		}
		p.Repack = append(p.Repack, pi)
		unused -= pi.DeadBytes
	}
	p.UnusedAfter = unused
	byID := func(a, b PackInfo) int { return bytes.Compare(a.ID[:], b.ID[:]) }
	slices.SortFunc(p.Delete, byID)
	slices.SortFunc(p.Repack, byID)
	for i := range p.Delete {
		p.condemned[p.Delete[i].ID] = true
		p.BytesFreed += p.Delete[i].Size
	}
	for i := range p.Repack {
		p.condemned[p.Repack[i].ID] = true
		p.repack[p.Repack[i].ID] = &p.Repack[i]
		p.BytesFreed += p.Repack[i].Size - p.Repack[i].LiveBytes
		p.BytesRewritten += p.Repack[i].LiveBytes
	}
	// Stored packs no index lists. Execute deletes them only after it has
	// the exclusive lock and has synced the index again.
	return r.Backend().List(ctx, backend.Pack, func(fi backend.FileInfo) error {
		id, err := blob.ParseID(fi.Name)
		if err != nil || stats[id] != nil {
			return nil
		}
		p.Unindexed = append(p.Unindexed, PackInfo{ID: id, Size: uint64(fi.Size)})
		p.BytesFreed += uint64(fi.Size)
		return nil
	})
}

// mergeIndex calls fn with every blob of the local index, in key order,
// and whether the live set holds it.
func (p *Plan) mergeIndex(r *repo.Repository, fn func(loc index.Location, k key, live bool) error) error {
	it, err := p.live.Iter()
	if err != nil {
		return err
	}
	defer it.Close()
	next, more, err := it.Next()
	if err != nil {
		return err
	}
	for _, t := range blob.Tiers {
		err := r.Index().ForEachBlob(t, func(loc index.Location) error {
			k := makeKey(t, loc.Type, loc.ID)
			for more && bytes.Compare(next[:], k[:]) < 0 {
				if next, more, err = it.Next(); err != nil {
					return err
				}
			}
			return fn(loc, k, more && next == k)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkHeld looks up, in the repository's pins, each damaged snapshot of
// the plan (filling in Workspace and Held) and returns an error wrapping
// repo.ErrDamaged when a pin holds one: prune never forgets a snapshot the
// lifecycle holds (a last good checkpoint, one an open recovery names),
// not even with ForgetDamaged. A pin that does not load stops it too. A
// damaged snapshot whose manifest does not open has no known workspace: it
// counts as held while any pin holds every snapshot of some workspace.
func (p *Plan) checkHeld(ctx context.Context, o Objects) error {
	pins, err := LoadPins(ctx, o)
	if err != nil {
		return fmt.Errorf("%w: refusing to delete anything: a snapshot is damaged, and the pins that say whether it may be forgotten do not load: %w", repo.ErrDamaged, err)
	}
	var held []string
	for i := range p.Damaged {
		d := &p.Damaged[i]
		if d.Workspace == "" {
			d.Workspace = manifestWorkspace(ctx, o, d.ID)
		}
		why, ok := pins.Held(d.Workspace, d.ID)
		if all := pins.HoldsAll(); !ok && d.Workspace == "" && len(all) > 0 {
			whys := make([]string, len(all))
			for i, ws := range all {
				w, _ := pins.Held(ws, blob.ID{})
				whys[i] = fmt.Sprintf("%q (%s)", ws, w)
			}
			why, ok = "its manifest does not open, so its workspace is unknown, and every snapshot of workspace "+strings.Join(whys, ", ")+" is held", true
		}
		d.Held = why
		if ok {
			ws := ""
			if d.Workspace != "" {
				ws = fmt.Sprintf(" of workspace %q", d.Workspace)
			}
			held = append(held, fmt.Sprintf("%s%s (held: %s)", d.ID, ws, why))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("%w: refusing to delete anything: damaged snapshot %s is held by the lifecycle, so prune does not forget it, not even with --forget-damaged; "+
		"capture the workspace again so its last good checkpoint moves to a new snapshot, or recover it from an older checkpoint, then run prune again (`lifeboat check` shows the damage)",
		repo.ErrDamaged, strings.Join(held, "; "))
}

// manifestWorkspace returns the workspace a snapshot manifest names, or ""
// when it does not open. prune may not import snapshot/, so it reads that
// one field of the manifest (format.md 11.1) itself.
func manifestWorkspace(ctx context.Context, o Objects, id blob.ID) string {
	_, b, err := o.LoadObject(ctx, crypt.KindSnapshot, id)
	if err != nil {
		return ""
	}
	var m struct {
		Workspace string `json:"workspace"`
	}
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	return m.Workspace
}
