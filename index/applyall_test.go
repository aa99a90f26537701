package index_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/pack"
)

// objectsWithRepeats returns n random objects of both tiers in which some
// blobs of earlier objects appear again, in other packs: the last object
// to name a blob decides its place.
func objectsWithRepeats(t *testing.T, n int) []index.Named {
	r := seedtest.Rand(t)
	var objs []index.Named
	for i := range n {
		o := randObject(r, blob.Tiers[i%2], 3, 40)
		if i >= 2 {
			prev := objs[i-2].Object // same tier
			if len(prev.Packs) > 0 && len(prev.Packs[0].Entries) > 0 && len(o.Packs) > 0 && len(o.Packs[0].Entries) > 0 {
				o.Packs[0].Entries[0].ID = prev.Packs[0].Entries[0].ID
				o.Packs[0].Entries[0].Type = prev.Packs[0].Entries[0].Type
			}
		}
		objs = append(objs, index.Named{ID: randID(r), Object: o})
	}
	return objs
}

func objectsOf(objs []index.Named) []*index.Object {
	var os []*index.Object
	for _, no := range objs {
		os = append(os, no.Object)
	}
	return os
}

func objectStates(t *testing.T, d *index.DB) map[blob.ID]index.ObjectState {
	t.Helper()
	m := map[blob.ID]index.ObjectState{}
	err := d.ForEachObject(func(id blob.ID, _ blob.Tier, s index.ObjectState) error {
		m[id] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func packStats(t *testing.T, d *index.DB) map[blob.ID]index.PackStats {
	t.Helper()
	m := map[blob.ID]index.PackStats{}
	if err := d.ForEachPackStats(func(p index.PackStats) error { m[p.ID] = p; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// ApplyAll of several objects leaves the DB as applying them in turn
// does: the same blob places (the last object naming a blob wins), the
// same packs, every object applied.
func TestApplyAllSameAsApplyInTurn(t *testing.T) {
	t.Parallel()
	objs := objectsWithRepeats(t, 9)
	inTurn := tempDB(t)
	for _, no := range objs {
		if err := inTurn.Apply(no.ID, no.Object); err != nil {
			t.Fatal(err)
		}
	}
	merged := tempDB(t)
	if err := merged.ApplyAll(objs); err != nil {
		t.Fatal(err)
	}
	want := locations(objectsOf(objs)...)
	checkDB(t, inTurn, want)
	checkDB(t, merged, want)
	states := objectStates(t, merged)
	if len(states) != len(objs) {
		t.Errorf("merged DB knows %d objects, want %d", len(states), len(objs))
	}
	for _, no := range objs {
		if states[no.ID] != index.ObjectApplied {
			t.Errorf("object %s: state %d, want applied", no.ID.Short(), states[no.ID])
		}
	}
	a, b := packStats(t, inTurn), packStats(t, merged)
	if len(a) != len(b) {
		t.Errorf("packs: %d applied in turn, %d merged", len(a), len(b))
	}
	for id, p := range a {
		if b[id] != p {
			t.Errorf("pack %s: %+v merged, %+v in turn", id.Short(), b[id], p)
		}
	}
	if err := merged.ApplyAll(nil); err != nil {
		t.Errorf("ApplyAll of no objects: %v", err)
	}
}

// ApplyAll of entries whose keys share their first eight bytes (tier,
// type and six id bytes) stores every one, and where objects name the
// same blob the last one decides its place. (The order itself:
// TestKeyOrder.)
func TestApplyAllKeysSharingTheirHead(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	prefix := randID(r)
	sharing := func() blob.ID { // the first 6 bytes of prefix, random after
		id := randID(r)
		copy(id[:6], prefix[:6])
		return id
	}
	var objs []index.Named
	var earlier []pack.Entry
	for i := range 4 {
		o := &index.Object{Tier: blob.Workspace}
		for range 3 {
			p := randPack(r, 30)
			for j := range p.Entries {
				p.Entries[j].Type = blob.Data
				p.Entries[j].ID = sharing()
				if len(earlier) > 0 && j%3 == 0 { // a blob an earlier pack placed
					p.Entries[j].ID = earlier[r.IntN(len(earlier))].ID
				}
			}
			earlier = append(earlier, p.Entries...)
			o.Packs = append(o.Packs, p)
		}
		objs = append(objs, index.Named{ID: blob.ID{byte(i + 1)}, Object: o})
	}
	d := tempDB(t)
	if err := d.ApplyAll(objs); err != nil {
		t.Fatal(err)
	}
	checkDB(t, d, locations(objectsOf(objs)...))
}

// An ApplyAll cut short by a crash leaves every one of its objects
// partial; the next Sync finishes them, or rebuilds without them when one
// is gone.
func TestInterruptedApplyAll(t *testing.T) {
	t.Parallel()
	for _, gone := range []bool{false, true} {
		t.Run(fmt.Sprintf("gone=%v", gone), func(t *testing.T) {
			t.Parallel()
			r := seedtest.Rand(t)
			d := tempDB(t)
			src := newFakeSource()
			old := randObject(r, blob.Workspace, 2, 10)
			src.objs[randID(r)] = old
			mustSync(t, d, src, index.SyncStats{Applied: 1})

			var objs []index.Named
			for range 3 {
				o := &index.Object{Tier: blob.Workspace}
				for range index.ApplyBatch / 200 {
					o.Packs = append(o.Packs, randPack(r, 400))
				}
				objs = append(objs, index.Named{ID: randID(r), Object: o})
			}
			if err := index.ApplyAllStopAfter(d, objs, 2); err != nil {
				t.Fatal(err)
			}
			states := objectStates(t, d)
			for _, no := range objs {
				if states[no.ID] != index.ObjectPartial {
					t.Fatalf("object %s after an interrupted ApplyAll: state %d, want partial", no.ID.Short(), states[no.ID])
				}
			}
			for i, no := range objs {
				if gone && i == 1 {
					continue
				}
				src.objs[no.ID] = no.Object
			}
			st, err := d.Sync(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			if (st.Dropped == 1) != gone {
				t.Errorf("Sync: dropped %d; want the gone object dropped", st.Dropped)
			}
			checkDB(t, d, locations(src.all()...))
			for id, s := range objectStates(t, d) {
				if s != index.ObjectApplied || src.objs[id] == nil {
					t.Errorf("object %s: state %d, in the source %v", id.Short(), s, src.objs[id] != nil)
				}
			}
		})
	}
}

// Sync applies the objects it loads in groups of about syncGroupEntries
// entries; a Sync cancelled with a group loaded leaves it for the next,
// and objects it cannot apply (locked, damaged) do not hold a group back.
func TestSyncAppliesInGroups(t *testing.T) {
	defer index.SetSyncGroupEntries(50)()
	r := seedtest.Rand(t)
	d := tempDB(t)
	src := newFakeSource()
	for range 12 { // 20 entries each: a group is applied after every third
		src.objs[randID(r)] = &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{randPack(r, 20)}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	loads := 0
	src.onLoad = func() {
		if loads++; loads == 7 {
			cancel()
		}
	}
	if _, err := d.Sync(ctx, src); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Sync = %v", err)
	}
	src.onLoad = nil
	n := 0
	for _, s := range objectStates(t, d) {
		if s == index.ObjectApplied {
			n++
		}
	}
	if n != 6 {
		t.Errorf("a Sync cancelled at its 7th load applied %d objects, want 6 (two groups of three; the seventh loaded, not applied)", n)
	}

	lockedID, damagedID := randID(r), randID(r)
	src.objs[lockedID] = randObject(r, blob.Sensitive, 2, 10)
	src.locked[lockedID] = true
	src.objs[damagedID] = randObject(r, blob.Workspace, 2, 10)
	src.failing[damagedID] = fmt.Errorf("index/%s: %w", damagedID.Short(), index.ErrObjectDamaged)
	mustSync(t, d, src, index.SyncStats{Applied: 6, Locked: 1, Damaged: []blob.ID{damagedID}})
	var applied []*index.Object
	for id, o := range src.objs {
		if id != lockedID && id != damagedID {
			applied = append(applied, o)
		}
	}
	checkDB(t, d, locations(applied...))
}
