package index

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"lifeboat/backend"
	"slices"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// Source is where Sync finds index objects: the repository.
type Source interface {
	// ListIndex calls fn with the id of every index object.
	ListIndex(ctx context.Context, fn func(id blob.ID) error) error
	// LoadIndex loads and opens one index object. An object of a tier the
	// caller's key lacks fails with an error wrapping crypt.ErrTierLocked;
	// a damaged one with an error wrapping ErrObjectDamaged; one removed
	// since it was listed with an error wrapping backend.ErrNotFound.
	LoadIndex(ctx context.Context, id blob.ID) (*Object, error)
}

// PackSource is a Source that can also say which packs are stored. Sync
// asks it about the packs of the index objects it applies, when its
// Source has it, so that a place in a pack that is not stored never takes
// a blob over from one that is (copies.go).
type PackSource interface {
	Source
	// PackStored reports whether pack id is stored.
	PackStored(ctx context.Context, id blob.ID) (bool, error)
	// ListPacks calls fn with the id of every stored pack.
	ListPacks(ctx context.Context, fn func(id blob.ID) error) error
}

// packStatMax is how many packs one Sync asks about one by one; once it
// would ask about more, it lists them all, once.
const packStatMax = 16

// packPresence remembers, within one Sync, which packs are stored.
type packPresence struct {
	src    PackSource
	stored map[blob.ID]bool
	listed bool // stored holds every pack stored when it was listed
	asked  int  // packs asked about one by one
	// missing counts the packs found not stored.
	missing int
}

// learn finds out which packs of objs are stored. A listing taken after
// the index objects were listed is complete for them: a pack is stored
// before any index object names it, so a pack it lacks was gone already.
func (p *packPresence) learn(ctx context.Context, objs []Named) error {
	var unknown []blob.ID
	seen := map[blob.ID]bool{}
	for _, no := range objs {
		for _, pi := range no.Object.Packs {
			if _, ok := p.stored[pi.ID]; !ok && !seen[pi.ID] {
				seen[pi.ID] = true
				unknown = append(unknown, pi.ID)
			}
		}
	}
	switch {
	case len(unknown) == 0:
	case p.listed:
	case p.asked+len(unknown) > packStatMax:
		err := p.src.ListPacks(ctx, func(id blob.ID) error { p.stored[id] = true; return nil })
		if err != nil {
			return fmt.Errorf("listing packs: %w", err)
		}
		p.listed = true
	default:
		p.asked += len(unknown)
		for _, id := range unknown {
			ok, err := p.src.PackStored(ctx, id)
			if err != nil {
				return fmt.Errorf("looking for pack %s: %w", id, err)
			}
			if ok {
				p.stored[id] = true
			}
		}
	}
	for _, id := range unknown {
		if !p.stored[id] {
			p.stored[id] = false
			p.missing++
		}
	}
	return nil
}

// ErrObjectDamaged marks an index object that does not decode or
// authenticate. Sync skips it; `repair index` replaces it.
var ErrObjectDamaged = errors.New("index object is damaged")

// SyncStats says what a Sync did.
type SyncStats struct {
	// Dropped counts applied index objects found gone (a prune superseded
	// them): their packs that no present object lists left the DB, with
	// every place in them, without a rebuild.
	Dropped int
	Applied int       // index objects newly applied
	Locked  int       // index objects of tiers the key cannot open
	Damaged []blob.ID // index objects skipped because they are damaged
	// UnstoredPacks counts the packs applied objects list that are not
	// stored (a PackSource says so): their places were kept as copies.
	UnstoredPacks int
}

// Sync brings the DB up to date with the repository's index objects. On
// a DB a transaction has found damaged (damage.go) it fails with
// ErrCorrupt: the caller reopens the DB, which rebuilds it.
func (d *DB) Sync(ctx context.Context, src Source) (SyncStats, error) {
	var st SyncStats
	if d.damaged.Load() {
		return st, fmt.Errorf("%w: %s: a transaction found it damaged", ErrCorrupt, d.path)
	}
	// An ApplyAll waits while the objects are listed and compared with the
	// DB's: one it recorded meanwhile, stored after the listing, would be
	// taken for an object a prune removed, and the DB emptied without it
	// (or, between its transactions, it marked applied with part of its
	// entries). Once todo is known, ApplyAll and the loads below may mix.
	d.syncMu.Lock()
	todo, gone, present, err := d.syncTodo(ctx, src)
	d.syncMu.Unlock()
	if err != nil {
		return st, err
	}
	slices.SortFunc(todo, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	// Loaded objects wait in group, up to syncGroupEntries entries, and are
	// applied together: a rebuild rewrites the DB's leaves once per group,
	// not once per object.
	var group []Named
	entries := 0
	var presence *packPresence
	if ps, ok := src.(PackSource); ok {
		presence = &packPresence{src: ps, stored: map[blob.ID]bool{}}
	}
	applyGroup := func() error {
		var stored func(blob.ID) bool
		if presence != nil {
			if err := presence.learn(ctx, group); err != nil {
				return err
			}
			stored = func(id blob.ID) bool { return presence.stored[id] }
			defer func() { st.UnstoredPacks = presence.missing }()
		}
		err := d.applyStored(group, stored)
		if err == nil {
			st.Applied += len(group)
		}
		group, entries = nil, 0
		return err
	}
	for _, id := range todo {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		o, err := src.LoadIndex(ctx, id)
		switch {
		case errors.Is(err, crypt.ErrTierLocked):
			st.Locked++
			err = d.markLocked(id)
		case errors.Is(err, ErrObjectDamaged):
			st.Damaged = append(st.Damaged, id)
			err = nil
		case errors.Is(err, backend.ErrNotFound):
			// Removed since it was listed (a prune's delete phase, which
			// writes its replacement objects first): as if never listed.
			// A caller that must see every object syncs under a lock.
			err = nil
		case err != nil:
			return st, fmt.Errorf("index object %s: %w", id, err)
		default:
			group = append(group, Named{id, o})
			if entries += o.Entries(); entries >= syncGroupEntries {
				err = applyGroup()
			}
		}
		if err != nil {
			return st, err
		}
	}
	if len(group) > 0 {
		if err := applyGroup(); err != nil {
			return st, err
		}
	}
	return st, d.dropGone(gone, present, &st)
}

// syncTodo lists the repository's index objects and returns those the DB
// has yet to apply, and those it applied that are gone (dropGone drops
// them). d.syncMu held.
func (d *DB) syncTodo(ctx context.Context, src Source) (todo, gone []blob.ID, present map[blob.ID]bool, err error) {
	present = map[blob.ID]bool{}
	if err := src.ListIndex(ctx, func(id blob.ID) error { present[id] = true; return nil }); err != nil {
		return nil, nil, nil, fmt.Errorf("listing index objects: %w", err)
	}
	if synced, err := d.synced(present); err != nil || synced {
		return nil, nil, nil, err
	}
	err = d.update(func(tx *bolt.Tx) error {
		objs := tx.Bucket(bucketObjects)
		seen := map[blob.ID]byte{}
		err := objs.ForEach(func(k, v []byte) error {
			if len(k) != blob.IDSize || len(v) != 2 {
				return fmt.Errorf("%w: object entry of %d/%d bytes", ErrCorrupt, len(k), len(v))
			}
			seen[blob.ID(k)] = v[1]
			return nil
		})
		if err != nil {
			return err
		}
		for id, state := range seen {
			switch {
			case present[id]:
			case state == objApplied || state == objPartial:
				gone = append(gone, id)
			default: // seen while its tier was locked, and gone since: forget it
				if err := objs.Delete(id[:]); err != nil {
					return err
				}
			}
		}
		for id := range present {
			if state, ok := seen[id]; !ok || state == objLocked || state == objPartial {
				todo = append(todo, id)
			}
		}
		return nil
	})
	return todo, gone, present, err
}

// dropGone drops the applied objects that are gone from the repository,
// after the new ones are applied: the places in packs that no present
// object lists go (a copy elsewhere takes over), and so do the objects. A
// pack a new object lists again (a prune's replacement) stays as it is.
// Until then the gone packs' places stay, as they did between the prune
// and this Sync; a pack a two-phase prune deleted is condemned in this DB
// until after the Sync (repo: BeginSession), so dedup does not use them.
func (d *DB) dropGone(gone []blob.ID, present map[blob.ID]bool, st *SyncStats) error {
	if len(gone) == 0 {
		return nil
	}
	var packs map[blob.ID]bool
	err := d.view(func(tx *bolt.Tx) error {
		packs = goneObjectPacks(tx, gone, present)
		return nil
	})
	if err == nil {
		err = d.Drop(gone, packs)
	}
	if err == nil {
		st.Dropped = len(gone)
	}
	return err
}

// synced reports whether the DB has applied exactly the index objects
// present, and nothing else: then Sync has nothing to do, and does it in a
// read transaction (a write one would commit and sync the file).
func (d *DB) synced(present map[blob.ID]bool) (bool, error) {
	ok := true
	err := d.view(func(tx *bolt.Tx) error {
		n := 0
		c := tx.Bucket(bucketObjects).Cursor()
		for k, v := c.First(); k != nil && ok; k, v = c.Next() {
			n++
			ok = len(k) == blob.IDSize && present[blob.ID(k)] && len(v) == 2 && v[1] == objApplied
		}
		ok = ok && n == len(present)
		return nil
	})
	return ok, err
}

func (d *DB) markLocked(id blob.ID) error {
	return d.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketObjects).Put(id[:], []byte{0, objLocked})
	})
}

// applyBatch bounds the entries one bbolt transaction writes: bbolt keeps
// every leaf a transaction touches in memory, and random ids touch many.
const applyBatch = 8192

// syncGroupEntries bounds the entries of the index objects Sync holds and
// applies together (ApplyAll): about 20 MiB while they are applied. A
// variable so that tests can make groups of small objects.
var syncGroupEntries = 1 << 17

// testApplyWaits, when set, is called by an ApplyAll that must wait for a
// Sync (or another ApplyAll).
var testApplyWaits func()

// Named is an index object with its id, for ApplyAll.
type Named struct {
	ID     blob.ID
	Object *Object
}

// Apply records the entries of index object id: ApplyAll of that one.
func (d *DB) Apply(id blob.ID, o *Object) error { return d.ApplyAll([]Named{{id, o}}) }

// ApplyAll records the entries of the index objects objs, all merged in
// key order, in transactions of applyBatch entries. Blob ids are random,
// so each object applied alone rewrites most of the blobs bucket's leaves;
// merged, each transaction covers one stretch of keys and every leaf is
// rewritten about once. A blob in several packs keeps its place in the
// last applied, the others as copies (copies.go). The caller vouches that
// every pack the objects list is stored (it has just saved them); Sync
// asks its Source instead. The first transaction marks every object partial and the last
// marks them applied, so an interrupted ApplyAll is redone by the next
// Sync, or undone by a rebuild if an object is gone.
func (d *DB) ApplyAll(objs []Named) error {
	return d.applyStored(objs, nil)
}

// ApplyChecked is ApplyAll where stored says which packs are stored (nil:
// all of them): a place in a pack that is not stored never takes a blob
// over and is never reused (unusable.go).
func (d *DB) ApplyChecked(objs []Named, stored func(pack blob.ID) bool) error {
	return d.applyStored(objs, stored)
}

// applyStored is ApplyAll with stored telling which packs are stored.
func (d *DB) applyStored(objs []Named, stored func(blob.ID) bool) error {
	if !d.syncMu.TryLock() { // a Sync decides what to apply (see Sync), or another ApplyAll runs
		if testApplyWaits != nil {
			testApplyWaits()
		}
		d.syncMu.Lock()
	}
	defer d.syncMu.Unlock()
	return d.applyAll(objs, -1, stored)
}

// keyOrder returns the numbers of the blob keys in keys (keySize bytes
// each, back to back) in key order, equal keys in their own order, so that
// of a key's puts the last stays. A blob id is random, so a key's first
// eight bytes, compared as one number, order nearly every pair alone.
func keyOrder(keys []byte) []int {
	type ref struct {
		head uint64 // the key's first eight bytes, big-endian
		i    int
	}
	refs := make([]ref, len(keys)/keySize)
	for i := range refs {
		refs[i] = ref{binary.BigEndian.Uint64(keys[i*keySize:]), i}
	}
	slices.SortFunc(refs, func(a, b ref) int {
		if c := cmp.Compare(a.head, b.head); c != 0 {
			return c
		}
		if c := bytes.Compare(keys[a.i*keySize+8:(a.i+1)*keySize], keys[b.i*keySize+8:(b.i+1)*keySize]); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	order := make([]int, len(refs))
	for j, r := range refs {
		order[j] = r.i
	}
	return order
}

// applyAll does ApplyAll's work; a test passes stopAfter >= 0 to end it
// after that many transactions, as a crash would. stored says which packs
// are stored (nil: all of them): a place in one that is not never takes a
// blob over from another (copies.go).
func (d *DB) applyAll(objs []Named, stopAfter int, stored func(pack blob.ID) bool) error {
	n := 0
	for _, no := range objs {
		n += no.Object.Entries()
	}
	// Every key and value in two slabs rather than two allocations per
	// entry: bbolt keeps the slices it is given until the commit, and the
	// slabs outlive every transaction here.
	keys := make([]byte, 0, n*keySize)
	vals := make([]byte, 0, n*locSize)
	for _, no := range objs {
		o := no.Object
		for _, p := range o.Packs {
			for _, e := range p.Entries {
				keys = appendBlobKey(keys, o.Tier, e.Type, e.ID)
				vals = appendLoc(vals, p.ID, e)
			}
		}
	}
	key := func(i int) []byte { return keys[i*keySize : (i+1)*keySize : (i+1)*keySize] }
	val := func(i int) []byte { return vals[i*locSize : (i+1)*locSize : (i+1)*locSize] }
	order := keyOrder(keys)
	mark := func(tx *bolt.Tx, state byte) error {
		for _, no := range objs {
			if err := tx.Bucket(bucketObjects).Put(no.ID[:], []byte{byte(no.Object.Tier), state}); err != nil {
				return err
			}
		}
		return nil
	}
	for n := 0; ; n++ {
		if n == stopAfter {
			return nil
		}
		batch := order[:min(applyBatch, len(order))]
		// Keys the filter rules out are not in the DB (appliers hold
		// syncMu, so none can arrive before this batch), and need no look
		// at a place they had: a capture's new blobs, nearly all of them.
		// A key repeated in the batch is looked at from its second time.
		var fresh []bool
		if d.filter.Load() != nil {
			fresh = make([]bool, len(batch))
			for i, e := range batch {
				fresh[i] = d.ruledOut(key(e)) && (i == 0 || !bytes.Equal(key(e), key(batch[i-1])))
			}
		}
		// done is how many entries of batch the transaction put: fewer
		// when the pages it read passed applyResidentBudget (resident.go).
		// (The filter may take the others' keys early: it may hold more.)
		done := len(batch)
		// The batch commits with its keys in the filter: see filter.go.
		err := d.filterUpdate(len(batch), func(i int) []byte { return key(batch[i]) }, func(tx *bolt.Tx) error {
			blobs, copies := tx.Bucket(bucketBlobs), tx.Bucket(bucketCopies)
			blobs.FillPercent = fillPercent
			base := fileResident()
			done = len(batch)
			for i, e := range batch {
				if i > 0 && i%residentCheckEvery == 0 && fileResident()-base > applyResidentBudget {
					done = i
					break
				}
				v := val(e)
				var err error
				if fresh != nil && fresh[i] {
					err = blobs.Put(key(e), v)
				} else {
					err = putPlace(blobs, copies, key(e), v, stored == nil || stored(blob.ID(v[:blob.IDSize])))
				}
				if err != nil {
					return err
				}
			}
			if n == 0 {
				// Before any entry is visible: a place in a pack that is
				// not stored must never be reused (unusable.go), and a
				// Sync that finds an object gone must know its packs.
				if err := markStored(tx, objs, stored); err != nil {
					return err
				}
				if err := recordPacks(tx, objs); err != nil {
					return err
				}
			}
			if done < len(order) {
				return mark(tx, objPartial)
			}
			packs := tx.Bucket(bucketPacks)
			for _, no := range objs {
				for _, p := range no.Object.Packs {
					if err := packs.Put(p.ID[:], packValue(no.Object.Tier, p)); err != nil {
						return err
					}
				}
			}
			return mark(tx, objApplied)
		})
		if err != nil {
			return err
		}
		if order = order[done:]; len(order) == 0 {
			return nil
		}
	}
}

// markStored records which packs of objs are stored (stored nil: all, a
// writer's own) in the unusable bucket.
func markStored(tx *bolt.Tx, objs []Named, stored func(pack blob.ID) bool) error {
	var gone, there []blob.ID
	for _, no := range objs {
		for _, p := range no.Object.Packs {
			if stored == nil || stored(p.ID) {
				there = append(there, p.ID)
			} else {
				gone = append(gone, p.ID)
			}
		}
	}
	if err := setUnusable(tx, there, UnusableGone, false); err != nil {
		return err
	}
	return setUnusable(tx, gone, UnusableGone, true)
}
