package capture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// An entry left out of a part (here a file that vanished before a reader
// opened it; as well one the user may not read) must not shift the names
// the part's record pairs with its other files' entries: savePart packs
// the part's nodes for the tree, so the record is built before that.
// Every other file keeps its own entry, and the next capture reads nothing.
func TestLeftOutEntryKeepsRecordNames(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{"d/a": "aaaa", "d/b": "bbbb", "d/c": "cccccc", "d/e": "eeeeeeee", "d/f": "ffffffffff"}
	capTestWrite(t, root, files)
	r := capTestOpenRepo(t)
	o, read := capTestCacheOptions(r)
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

// The merge of a part's sorted names with its record's: names with bytes
// of 0x80 and above, invalid UTF-8, names that are prefixes of others,
// among entries that are not regular files (a symlink, a subdirectory, a
// FIFO, an empty file) and hard links. An unchanged re-capture reads
// nothing; a file that became a directory, a directory that became a
// file, a removed name and an edited file are read (only they), and the
// capture after that reads nothing again.
func TestMergeJoinMixedListing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{
		"d/a": "1", "d/a\x80": "22", "d/a\xff\xfe": "333", "d/ab": "4444", "d/\u00e9": "55555",
		"d/\xff": "666666", "d/z": "7777777", "d/aa/in": "88888888", "d/h1": "hard link",
	}
	capTestWrite(t, root, files)
	d := filepath.Join(root, "d")
	for _, err := range []error{
		os.Symlink("a", filepath.Join(d, "a0")), unix.Mkfifo(filepath.Join(d, "b"), 0o644),
		os.WriteFile(filepath.Join(d, "c0"), nil, 0o644), os.Link(filepath.Join(d, "h1"), filepath.Join(d, "h2")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := capTestOpenRepo(t)
	o, read := capTestCacheOptions(r)
	capture := func(step string, want int64) {
		t.Helper()
		read.Store(0)
		m := capTestCapture(t, r, root, o)
		if n := read.Load(); n != want {
			t.Errorf("%s: read %d bytes, want %d", step, n, want)
		}
		capTestCompare(t, r, root, m)
	}
	var total int64
	for _, c := range files {
		total += int64(len(c))
	}
	capture("first", total)
	for rel := range files {
		if _, _, ok := capTestCacheEntry(t, r, o.Workspace, rel); !ok {
			t.Errorf("%q: no cache entry", rel)
		}
	}
	capture("unchanged", 0)

	for _, p := range []string{"d/ab", "d/aa/in", "d/aa", "d/a\x80"} {
		if err := os.Remove(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	changed := map[string]string{"d/ab/x": "new in ab", "d/aa": "aa is a file", "d/\u00e9": "edited"}
	capTestWrite(t, root, changed)
	var want int64
	for _, c := range changed {
		want += int64(len(c))
	}
	capture("changed", want)
	if _, _, ok := capTestCacheEntry(t, r, o.Workspace, "d/a\x80"); ok {
		t.Error(`removed "d/a\x80" still has a cache entry`)
	}
	capture("unchanged again", 0)
}

// The prune after the manifest drops the records of parts no longer seen
// (a directory's second part once it has fewer entries, a directory whose
// files are all empty now) and keeps the others; a capture that fails
// writes and deletes no record.
func TestCacheRecordsPruneAndFailedCapture(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{"e/x": "x", "e/y": "yy", "k/z": "zzz"}
	for i := range snapshot.MaxNodesPerBlob + 2 {
		files[fmt.Sprintf("big/f%05d", i)] = strconv.Itoa(i)
	}
	capTestWrite(t, root, files)
	r, o, read, cache := capTestCountingSetup(t)
	records := func() int { t.Helper(); return capTestRecordCount(t, r, o.Workspace) }
	capTestCapture(t, r, root, o)
	if n := records(); n != 4 { // big's two parts, e, k
		t.Fatalf("first capture: %d records, want 4", n)
	}

	// A capture cancelled once it has read a new file writes nothing.
	capTestWrite(t, root, map[string]string{"k/new": "new file"})
	for _, p := range []string{"e/x", "e/y"} {
		if err := os.Truncate(filepath.Join(root, p), 0); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.hooks.afterRead = func(path string, _ int) {
		if path == "k/new" {
			cancel()
		}
	}
	cache.puts.Store(0)
	if _, err := Run(ctx, r, root, o); err == nil {
		t.Fatal("cancelled capture succeeded")
	}
	if n := cache.puts.Load(); n != 0 || records() != 4 {
		t.Errorf("cancelled capture wrote %d records, holds %d; want 0, 4", n, records())
	}
	o.hooks.afterRead = nil

	for i := range 3 {
		if err := os.Remove(filepath.Join(root, fmt.Sprintf("big/f%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	read.Store(0)
	m := capTestCapture(t, r, root, o)
	capTestCompare(t, r, root, m)
	// big has one part now; e has no file to remember.
	if n := records(); n != 2 {
		t.Errorf("after the shrink: %d records, want 2", n)
	}
	if _, _, ok := capTestCacheEntry(t, r, o.Workspace, "k/new"); !ok {
		t.Error("k/new: no cache entry")
	}
	read.Store(0)
	capTestCapture(t, r, root, o)
	if n := read.Load(); n != 0 || records() != 2 {
		t.Errorf("unchanged: read %d bytes, %d records; want 0, 2", n, records())
	}
}

// A part's record names the tree the part was saved as: an unchanged
// re-capture finds each such tree by its record, without a lookup in the
// local index; a part whose tree changed (here a subdirectory's mode) is
// saved as usual and its record names the new tree; and once a blob has
// left the index (the generation moved: here the very pack holding the
// trees), a tree a record names is looked up again and saved anew.
func TestRecordsNameTheirTrees(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{"top": "t", "a/f": "af", "a/b/f": "abf", "a/b/c/f": "abcf", "d/f": "df"}
	capTestWrite(t, root, files)
	capTestAge(t, root)
	r, o, read, cache := capTestCountingSetup(t)
	// capture captures the tree, which it must read none of, and returns
	// its root, the index lookups it made and the records it wrote.
	capture := func(step string) (blob.ID, int64, int64) {
		t.Helper()
		read.Store(0)
		cache.puts.Store(0)
		before := r.Index().Lookups()
		m := capTestCapture(t, r, root, o)
		lookups := r.Index().Lookups() - before // (capTestCompare looks up what it loads)
		if read.Load() != 0 {
			t.Errorf("%s: read %d bytes, want 0", step, read.Load())
		}
		capTestCompare(t, r, root, m)
		return m.Root.Subtree[0], lookups, cache.puts.Load()
	}
	first := capTestCapture(t, r, root, o).Root.Subtree[0]
	// The root, a, a/b, a/b/c and d: one record each, each naming its tree.
	if tree, lookups, puts := capture("unchanged"); tree != first || lookups != 0 || puts != 0 {
		t.Errorf("unchanged: root %s (was %s), %d index lookups, %d records written; want the same root, 0, 0",
			tree.Short(), first.Short(), lookups, puts)
	}

	// a/b/c's mode is in a/b's tree: a/b, a and the root change, a/b/c
	// and d do not.
	if err := os.Chmod(filepath.Join(root, "a/b/c"), 0o750); err != nil {
		t.Fatal(err)
	}
	changed, lookups, puts := capture("a/b/c's mode changed")
	if changed == first || lookups != 3 || puts != 3 {
		t.Errorf("a/b/c's mode changed: root %s (was %s), %d index lookups, %d records written; want a new root, 3, 3",
			changed.Short(), first.Short(), lookups, puts)
	}
	if tree, lookups, puts := capture("unchanged again"); tree != changed || lookups != 0 || puts != 0 {
		t.Errorf("unchanged again: root %s (was %s), %d index lookups, %d records written; want the same root, 0, 0",
			tree.Short(), changed.Short(), lookups, puts)
	}

	// The pack holding the trees leaves the index, as after a prune that
	// deleted it: every tree is looked up, found gone, and saved again.
	loc, ok, err := r.Index().Lookup(blob.Workspace, blob.Tree, changed)
	if err != nil || !ok {
		t.Fatalf("the root tree %s is not indexed: %v", changed.Short(), err)
	}
	if err := r.Index().Drop(nil, map[blob.ID]bool{loc.Pack: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Index().Lookup(blob.Workspace, blob.Tree, changed); err != nil || ok {
		t.Fatalf("the root tree %s is still indexed after its pack was dropped (%v)", changed.Short(), err)
	}
	read.Store(0)
	m := capTestCapture(t, r, root, o)
	if m.Root.Subtree[0] != changed {
		t.Errorf("after the drop: root %s, want %s", m.Root.Subtree[0].Short(), changed.Short())
	}
	capTestCompare(t, r, root, m)
	for _, n := range capTestFlatten(t, r, m.Root.Subtree) {
		for _, id := range n.Subtree {
			if _, ok, err := r.Index().Lookup(blob.Workspace, blob.Tree, id); err != nil || !ok {
				t.Errorf("after the drop: tree %s of %s is not indexed (%v)", id.Short(), n.Name, err)
			}
		}
	}
	snaptest.Check(t, r)
}

// Records of version 1, which name no tree, as an older lifeboat left
// them: the next capture trusts their files (reads nothing), looks each
// part's tree up, and writes every record again as version 2, after which
// an unchanged capture looks up nothing and writes nothing.
func TestVersion1RecordsUpgraded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{"top": "t", "a/f": "af", "a/b/f": "abf", "d/f": "df"}
	capTestWrite(t, root, files)
	capTestAge(t, root)
	r, o, read, cache := capTestCountingSetup(t)
	capTestCapture(t, r, root, o)

	k, err := r.TierKeys(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	wsKey, rootKey := capCacheKeys(k, o.Workspace)
	dirs := map[string]blob.ID{"": rootKey}
	dirs["a"] = capChildKey(k, rootKey, "a")
	dirs["a/b"] = capChildKey(k, dirs["a"], "b")
	dirs["d"] = capChildKey(k, rootKey, "d")
	for dir, dk := range dirs {
		key := capPartKey(dk, 0)
		var sealed []byte
		if err := r.Index().FileCacheGet(wsKey, key[:], func(v []byte) { sealed = slices.Clone(v) }); err != nil || sealed == nil {
			t.Fatalf("%q: no record (%v)", dir, err)
		}
		plain, err := k.Open(nil, sealed, capRecordAAD(wsKey, key[:]))
		if err != nil || len(plain) < 9+blob.IDSize || plain[0] != capRecordVersion {
			t.Fatalf("%q: record %x does not open as version %d: %v", dir, plain, capRecordVersion, err)
		}
		v1 := append(append([]byte{capRecordVersionV1}, plain[1:9]...), plain[9+blob.IDSize:]...)
		rec := index.FileCacheRecord{Key: key[:], Value: k.Seal(nil, v1, capRecordAAD(wsKey, key[:]))}
		if err := r.Index().FileCachePut(wsKey, []index.FileCacheRecord{rec}); err != nil {
			t.Fatal(err)
		}
	}

	for _, step := range []struct {
		name                  string
		wantLookups, wantPuts int64
	}{{"over version 1 records", int64(len(dirs)), int64(len(dirs))}, {"unchanged", 0, 0}} {
		read.Store(0)
		cache.puts.Store(0)
		before := r.Index().Lookups()
		m := capTestCapture(t, r, root, o)
		if lookups := r.Index().Lookups() - before; read.Load() != 0 || lookups != step.wantLookups || cache.puts.Load() != step.wantPuts {
			t.Errorf("%s: read %d bytes, %d index lookups, %d records written; want 0, %d, %d", step.name,
				read.Load(), lookups, cache.puts.Load(), step.wantLookups, step.wantPuts)
		}
		capTestCompare(t, r, root, m)
	}
}
