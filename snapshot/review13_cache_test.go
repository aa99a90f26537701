package snapshot

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// An entry left out of a part (here a file that vanished before a reader
// opened it; as well one the user may not read) must not shift the names
// the part's record pairs with its other files' entries: savePart packs
// the part's nodes for the tree, and the record is built after it. Every
// other file keeps its own entry, and the next capture reads nothing.
func TestReview13LeftOutEntryKeepsRecordNames(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{"d/a": "aaaa", "d/b": "bbbb", "d/c": "cccccc", "d/e": "eeeeeeee", "d/f": "ffffffffff"}
	capTestWrite(t, root, files)
	r := capTestOpenRepo(t)
	var read atomic.Int64
	o := capTestOptions(&read)
	o.Cache = r.Index()
	o.hooks.beforeOpen = func(path string) {
		if path == "d/b" {
			if err := os.Remove(filepath.Join(root, "d", "b")); err != nil {
				t.Error(err)
			}
		}
	}
	m := capTestCapture(t, r, root, o)
	if _, ok := capTestErrors(m)["d/b"]; !ok {
		t.Fatalf("d/b was not left out: errors %v", capTestErrors(m))
	}
	delete(files, "d/b")
	for _, rel := range []string{"d/a", "d/c", "d/e", "d/f"} {
		e, _, ok := capTestCacheEntry(t, r, o.Workspace, rel)
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, rel), &st); err != nil {
			t.Fatal(err)
		}
		if !ok || e.Inode != st.Ino || e.Size != uint64(st.Size) {
			t.Errorf("%s: cache entry %v (found %v), want inode %d size %d", rel, e, ok, st.Ino, st.Size)
		}
	}
	o.hooks.beforeOpen = nil
	read.Store(0)
	m = capTestCapture(t, r, root, o)
	if n := read.Load(); n != 0 {
		t.Errorf("unchanged re-capture read %d bytes, want 0", n)
	}
	capTestCompare(t, r, root, m)
}
