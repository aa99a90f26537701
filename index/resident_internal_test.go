package index

import (
	"testing"

	"lifeboat/blob"
)

// The write transactions' budget reads the process's mapped file pages:
// if that stopped working, large applies would map the whole index again.
func TestFileResidentReadable(t *testing.T) {
	t.Parallel()
	if n := fileResident(); n <= 0 {
		t.Fatalf("fileResident() = %d: /proc/self/statm unreadable", n)
	}
}

// With no budget every apply and drop transaction stops after
// residentCheckEvery keys and the next goes on: the objects end applied
// with every entry, and a drop removes every place in its packs. Not
// parallel: the budget is a package variable every DB reads.
func TestApplyAndDropCutByResidentBudget(t *testing.T) {
	old := applyResidentBudget
	applyResidentBudget = -1 << 62
	defer func() { applyResidentBudget = old }()
	d, err := OpenDB(t.TempDir(), blob.ID{1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, b := bigObject(1000, 7), bigObject(300, 8)
	if err := d.ApplyAll([]Named{{blob.ID{7}, a}, {blob.ID{8}, b}}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		n, _, err := d.Count()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 1300 {
		t.Fatalf("%d blobs after the apply, want 1300", n)
	}
	err = d.ForEachObject(func(id blob.ID, _ blob.Tier, st ObjectState) error {
		if st != ObjectApplied {
			t.Errorf("object %s is %v after the apply", id.Short(), st)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	gone := map[blob.ID]bool{}
	for _, p := range a.Packs {
		gone[p.ID] = true
	}
	if err := d.Drop([]blob.ID{{7}}, gone); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 300 {
		t.Fatalf("%d blobs after the drop, want 300", n)
	}
	for _, p := range b.Packs {
		for _, e := range p.Entries {
			if _, ok, err := d.Lookup(blob.Workspace, e.Type, e.ID); !ok || err != nil {
				t.Fatalf("blob %s of the object kept: %v, %v", e.ID.Short(), ok, err)
			}
		}
	}
}
