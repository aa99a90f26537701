package capture

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/internal/seedtest"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// capTestRichTree makes a tree with every kind of entry Run handles.
func capTestRichTree(t *testing.T) string {
	t.Helper()
	rng := seedtest.Rand(t)
	root := t.TempDir()
	big := make([]byte, 3<<20+12345) // several chunks
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	capTestWrite(t, root, map[string]string{
		"a.txt":            "hello",
		"dir/b.txt":        "world",
		"dir/sub/c.txt":    strings.Repeat("c", 1000),
		"dir/empty":        "",
		"big.bin":          string(big),
		"names/café":       "utf-8",
		"names/caf\xe9":    "latin-1",
		"names/\xff\xfe":   "invalid utf-8",
		"names/日本語":        "cjk",
		"names/a\nb\\c d":  "newline, backslash, space",
		"links/first":      "shared content",
		"modes/setuid":     "x",
		"modes/setgid":     "y",
		"xattr/file":       "has xattrs",
		"z-last/empty-dir": "",
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(root, "z-last/empty-dir")))
	must(os.Mkdir(filepath.Join(root, "z-last/empty-dir"), 0o700))
	must(os.Link(filepath.Join(root, "links/first"), filepath.Join(root, "links/second")))
	must(os.Link(filepath.Join(root, "links/first"), filepath.Join(root, "dir/third-name")))
	must(os.Symlink("b", filepath.Join(root, "links/a")))
	must(os.Symlink("a", filepath.Join(root, "links/b")))
	must(os.Symlink("/", filepath.Join(root, "links/root")))
	must(os.Symlink("../dir\xff", filepath.Join(root, "links/raw-target")))
	must(unix.Mkfifo(filepath.Join(root, "fifo"), 0o640))
	must(os.Chmod(filepath.Join(root, "modes/setuid"), 0o4755))
	must(os.Chmod(filepath.Join(root, "modes/setgid"), 0o2711))
	must(os.Mkdir(filepath.Join(root, "modes/sticky"), 0o1777))
	must(os.Chmod(filepath.Join(root, "modes/sticky"), 0o1777))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(root, "sock"), Net: "unix"})
	must(err)
	t.Cleanup(func() { _ = l.Close() })
	for _, p := range []string{"xattr/file", "xattr"} {
		err := unix.Setxattr(filepath.Join(root, p), "user.lifeboat", []byte("v\x00\xff"), 0)
		if errors.Is(err, unix.ENOTSUP) {
			t.Log("filesystem without user xattrs; not testing them")
			break
		}
		must(err)
		must(unix.Setxattr(filepath.Join(root, p), "user.empty", nil, 0))
		must(unix.Setxattr(filepath.Join(root, p), "trusted.not-captured", []byte("x"), 0))
	}
	return root
}

func TestCaptureRoundTrip(t *testing.T) { storetest.Each(t, testCaptureRoundTrip) }

func testCaptureRoundTrip(t *testing.T, s storetest.Store) {
	root := capTestRichTree(t)
	r := newCapTestRepoIn(t, s).open(t)
	var read atomic.Int64
	o := capTestOptions(&read)
	o.Host, o.Instance, o.Tags = "host-1", "i-123", []string{"t1", "t2"}
	prog := &capTestRecorder{}
	o.Progress = prog
	m := capTestCapture(t, r, root, o)
	if !m.Complete || len(m.Errors) != 0 {
		t.Fatalf("capture not complete: %v", m.Errors)
	}
	capTestCompare(t, r, root, m)

	if m.Workspace != "ws-test" || m.Host != "host-1" || m.Instance != "i-123" || !slices.Equal(m.Tags, []string{"t1", "t2"}) ||
		!m.Time.Equal(time.Unix(1700000000, 0)) || m.Parent != nil || len(m.Paths) != 1 || m.Paths[0] != root {
		t.Errorf("manifest fields: %+v", m)
	}
	if m.Root.Type != snapshot.TypeDir || string(m.Root.Name) != filepath.Base(root) {
		t.Errorf("root node %+v", capTestMeta(&m.Root))
	}
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		t.Fatal(err)
	}
	if m.Root.Mode != st.Mode&07777 || m.Root.MtimeNs != st.Mtim.Nano() {
		t.Errorf("root metadata %+v", capTestMeta(&m.Root))
	}
	want := capTestExpect(t, root)
	var files, dirs, bytes uint64
	for _, n := range want {
		switch n.Type {
		case snapshot.TypeDir:
			dirs++
		case snapshot.TypeFile:
			files++
			bytes += n.Size
		default:
			files++
		}
	}
	if m.Totals.Files != files || m.Totals.Dirs != dirs+1 || m.Totals.Bytes != bytes || m.Totals.NewBytes != bytes {
		t.Errorf("totals %+v, want files %d dirs %d bytes %d", m.Totals, files, dirs+1, bytes)
	}
	if read.Load() != int64(bytes) {
		t.Errorf("read %d bytes, want %d", read.Load(), bytes)
	}
	if prog.files.Load() != files || prog.bytes.Load() != bytes || prog.errs.Load() != 0 {
		t.Errorf("progress saw %d files, %d bytes, %d errors", prog.files.Load(), prog.bytes.Load(), prog.errs.Load())
	}
	got := capTestFlatten(t, r, m.Root.Subtree)
	// dir/third-name comes first in walk order (depth first, by name), so
	// it holds the content and the other names link to it.
	for p, typ := range map[string]snapshot.NodeType{"sock": snapshot.TypeSocket, "fifo": snapshot.TypeFIFO, "links/second": snapshot.TypeHardlink,
		"dir/third-name": snapshot.TypeFile, "links/first": snapshot.TypeHardlink, "links/a": snapshot.TypeSymlink, "names/caf\xe9": snapshot.TypeFile} {
		if got[p] == nil || got[p].Type != typ {
			t.Errorf("%q: %+v, want type %s", p, got[p], typ)
		}
	}
	if n := got["dir/third-name"]; len(n.Content) == 0 {
		t.Errorf("dir/third-name: %+v", capTestMeta(n))
	}
	for _, p := range []string{"links/first", "links/second"} {
		if n := got[p]; string(n.LinkPath) != "dir/third-name" || n.Content != nil {
			t.Errorf("%s: %+v", p, capTestMeta(n))
		}
	}
	snaptest.Check(t, r)
}

func TestCaptureDeterministic(t *testing.T) {
	t.Parallel()
	root := capTestRichTree(t)
	r := capTestOpenRepo(t)
	m1 := capTestCapture(t, r, root, capTestOptions(nil))
	o := capTestOptions(nil)
	o.Readers = 1
	o.Parent = m1
	m2 := capTestCapture(t, r, root, o)
	if !slices.Equal(m1.Root.Subtree, m2.Root.Subtree) {
		t.Errorf("same tree captured twice: root %v then %v", m1.Root.Subtree, m2.Root.Subtree)
	}
	if m2.Parent == nil || *m2.Parent != m1.ID {
		t.Errorf("parent %v, want %s", m2.Parent, m1.ID)
	}
	if m2.Totals.NewBytes != 0 {
		t.Errorf("second capture stored %d new bytes", m2.Totals.NewBytes)
	}
	if m1.ID == m2.ID {
		t.Error("two captures share a manifest id")
	}
}

func TestCaptureIncremental(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)
	root := t.TempDir()
	files := map[string]string{}
	var total int64
	for i := range 300 {
		b := make([]byte, rng.IntN(20000)+1)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		p := filepath.Join("d"+string(rune('a'+i%7)), "sub"+string(rune('a'+i%3)), "f"+strings.Repeat("x", i%5)+string(rune('A'+i%26))+string(rune('0'+i/26)))
		files[p] = string(b)
	}
	for _, c := range files {
		total += int64(len(c))
	}
	capTestWrite(t, root, files)
	var withXattr, noXattr string
	for p := range files {
		if withXattr == "" {
			withXattr = p
		} else if noXattr == "" && p != withXattr {
			noXattr = p
		}
	}
	haveXattrs := unix.Setxattr(filepath.Join(root, withXattr), "user.k", []byte("v"), 0) == nil
	capTestAge(t, root)
	tr := newCapTestRepo(t)
	r := tr.open(t)

	o, read := capTestCacheOptions(r)
	m1 := capTestCapture(t, r, root, o)
	if read.Load() != total {
		t.Fatalf("first capture read %d bytes, want %d", read.Load(), total)
	}
	if n := capTestCached(t, r, o.Workspace, files); n != len(files) {
		t.Fatalf("file cache holds entries for %d files, want %d", n, len(files))
	}
	// Unchanged, in a later process (the repository reopened): nothing read.
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r = tr.open(t)
	o.Cache = r.FileCache()
	read.Store(0)
	m2 := capTestCapture(t, r, root, o)
	if read.Load() != 0 {
		t.Errorf("unchanged capture read %d bytes", read.Load())
	}
	if want := (snapshot.Totals{Files: m1.Totals.Files, Dirs: m1.Totals.Dirs, Bytes: m1.Totals.Bytes}); !slices.Equal(m1.Root.Subtree, m2.Root.Subtree) || m2.Totals != want {
		t.Errorf("unchanged capture differs: %v %+v, then %v %+v", m1.Root.Subtree, m1.Totals, m2.Root.Subtree, m2.Totals)
	}

	capTestCompare(t, r, root, m2) // xattrs too, though the file was not read

	if haveXattrs {
		// A new xattr moves the ctime: the file is read again.
		if err := unix.Setxattr(filepath.Join(root, noXattr), "user.new", []byte("n"), 0); err != nil {
			t.Fatal(err)
		}
		read.Store(0)
		m := capTestCapture(t, r, root, o)
		if read.Load() != int64(len(files[noXattr])) {
			t.Errorf("after adding an xattr, capture read %d bytes, want %d", read.Load(), len(files[noXattr]))
		}
		capTestCompare(t, r, root, m)
	}

	// Change one file: only it is read.
	changed := withXattr
	newContent := strings.Repeat("changed ", 1000)
	capTestWrite(t, root, map[string]string{changed: newContent})
	// (Not capTestAge: setting times moves every file's ctime.)
	read.Store(0)
	m3 := capTestCapture(t, r, root, o)
	if read.Load() != int64(len(newContent)) {
		t.Errorf("after changing %s (%d bytes), capture read %d bytes", changed, len(newContent), read.Load())
	}
	capTestCompare(t, r, root, m3)

	// Remove a file: its cache entry goes too.
	if err := os.Remove(filepath.Join(root, changed)); err != nil {
		t.Fatal(err)
	}
	read.Store(0)
	m4 := capTestCapture(t, r, root, o)
	if read.Load() != 0 {
		t.Errorf("after a removal, capture read %d bytes", read.Load())
	}
	capTestCompare(t, r, root, m4)
	if _, _, ok := capTestCacheEntry(t, r, o.Workspace, filepath.ToSlash(changed)); ok {
		t.Errorf("the removed file %s keeps its cache entry", changed)
	}
	if n := capTestCached(t, r, o.Workspace, files); n != len(files)-1 {
		t.Errorf("file cache holds entries for %d files, want %d", n, len(files)-1)
	}

	// Another workspace of the same tree has its own cache.
	read.Store(0)
	o2 := o
	o2.Workspace = "other"
	capTestCapture(t, r, root, o2)
	if read.Load() != total-int64(len(files[changed])) {
		t.Errorf("other workspace read %d bytes, want %d", read.Load(), total-int64(len(files[changed])))
	}
	snaptest.Check(t, r)
}

func capTestWsKey(t testing.TB, r *repo.Repository, ws string) string {
	k, err := r.TierKeys(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := capCacheKeys(k, ws)
	return key
}
