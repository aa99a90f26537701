package index

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/blob"
	"lifeboat/pack"
)

type mapSource map[blob.ID]*Object

func (m mapSource) ListIndex(_ context.Context, fn func(blob.ID) error) error {
	for id := range m {
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

func (m mapSource) LoadIndex(_ context.Context, id blob.ID) (*Object, error) { return m[id], nil }

func bigObject(n int, seed byte) *Object {
	o := &Object{Tier: blob.Workspace}
	for i := 0; i < n; i += 20 {
		p := PackInfo{ID: blob.ID{seed, byte(i >> 16), byte(i >> 8), byte(i)}, Size: 1 << 20}
		for j := range 20 {
			p.Entries = append(p.Entries, pack.Entry{Type: blob.Data, ID: blob.ID{seed, 1, byte(i >> 16), byte(i >> 8), byte(i), byte(j)},
				Offset: uint32(j * 100), Length: 100, PlainLen: 60})
		}
		o.Packs = append(o.Packs, p)
	}
	return o
}

// An Apply cut short by a crash: if its object is gone at the next Sync the
// DB is rebuilt without the partial entries; if it is still there, Sync
// finishes it.
func TestInterruptedApply(t *testing.T) {
	t.Parallel()
	for _, gone := range []bool{true, false} {
		d, err := OpenDB(t.TempDir(), blob.ID{1})
		if err != nil {
			t.Fatal(err)
		}
		objID := blob.ID{9}
		o := bigObject(3*applyBatch, 9)
		if err := d.applyAll([]Named{{objID, o}}, 1, nil); err != nil {
			t.Fatal(err)
		}
		probe := o.Packs[0].Entries[0].ID
		src := mapSource{blob.ID{6}: bigObject(40, 6)}
		if !gone {
			src[objID] = o
		}
		st, err := d.Sync(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		_, ok, err := d.Lookup(blob.Workspace, blob.Data, probe)
		if err != nil {
			t.Fatal(err)
		}
		n, _, _ := d.Count()
		switch {
		case gone && (ok || st.Dropped != 1 || n != 40):
			t.Fatalf("object gone: found=%v dropped=%d count=%d, want it dropped, 40 entries left", ok, st.Dropped, n)
		case !gone && (!ok || n != 40+o.Entries()):
			t.Fatalf("object present: found=%v count=%d, want the apply finished", ok, n)
		}
		_ = d.Close()
	}
}

// A private cache file left by a crashed process is removed by the next
// open; one held by a live DB is not.
func TestStalePrivateFilesRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shared, err := OpenDB(dir, blob.ID{1})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	live, err := OpenDB(dir, blob.ID{1})
	if err != nil || !live.Private() {
		t.Fatalf("second open: private=%v err=%v", live != nil && live.Private(), err)
	}
	defer live.Close()
	stale := filepath.Join(dir, "index-private-stale.db")
	if err := os.WriteFile(stale, []byte("left by a crash"), 0o600); err != nil {
		t.Fatal(err)
	}
	third, err := OpenDB(dir, blob.ID{1})
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale private file still there: %v", err)
	}
	if _, err := os.Stat(live.Path()); err != nil {
		t.Fatalf("live private file removed: %v", err)
	}
}
