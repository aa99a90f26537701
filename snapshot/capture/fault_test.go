package capture

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

func TestCaptureVanishedFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{"keep": "kept", "gone\xff": "soon gone", "x/also": "here",
		"links/a-first": "linked", "other/file": "y"})
	if err := os.Link(filepath.Join(root, "links/a-first"), filepath.Join(root, "links/b-second")); err != nil {
		t.Fatal(err)
	}
	r := capTestOpenRepo(t)
	o := capTestOptions(nil)
	prog := &capTestRecorder{}
	o.Progress = prog
	var hit atomic.Int32
	// a-first goes only once the walker has seen b-second as its second
	// name (the queue holds every file, so the walker cannot block).
	o.Readers = 4
	walked := make(chan struct{})
	o.hooks.walked = func() { close(walked) }
	o.hooks.beforeOpen = func(p string) {
		if p == `gone\xff` || p == "links/a-first" {
			<-walked
			hit.Add(1)
			if err := os.Remove(filepath.Join(root, strings.ReplaceAll(p, `\xff`, "\xff"))); err != nil {
				t.Error(err)
			}
		}
	}
	m := capTestCapture(t, r, root, o)
	if hit.Load() != 2 {
		t.Fatalf("hook hit %d times, want 2", hit.Load())
	}
	if m.Complete {
		t.Error("capture with a vanished file is complete")
	}
	errs := capTestErrors(m)
	if !strings.Contains(errs[`gone\xff`], "vanished") || !strings.Contains(errs["links/a-first"], "vanished") ||
		!strings.Contains(errs["links/b-second"], "hard link to links/a-first") || len(errs) != 3 {
		t.Errorf("errors %q", errs)
	}
	if prog.errs.Load() != 3 {
		t.Errorf("progress told of %d errors, want 3", prog.errs.Load())
	}
	// The snapshot is what is left; b-second, linked to a name the
	// snapshot lacks, is left out too (restore could not make it).
	// (The removals moved the mtime of links/.)
	if err := os.Remove(filepath.Join(root, "links/b-second")); err != nil {
		t.Fatal(err)
	}
	capTestCompare(t, r, root, m, "links")
	snaptest.Check(t, r)
}

func TestCaptureChangedWhileRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		changes    int  // reads after which the file grows
		wantPrefix bool // it only grew: a verified prefix, not an error
	}{{"once then stable", 1, false}, {"every time", 2, true}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			capTestWrite(t, root, map[string]string{"log": "line 0\n", "quiet": "q"})
			r := capTestOpenRepo(t)
			o, _ := capTestCacheOptions(r)
			attempts := 0
			o.hooks.afterRead = func(p string, attempt int) {
				if p != "log" {
					return
				}
				attempts = attempt
				if attempt <= tc.changes {
					f, err := os.OpenFile(filepath.Join(root, "log"), os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = f.WriteString("line " + string(rune('0'+attempt)) + "\n")
					_ = f.Close()
				}
			}
			m := capTestCapture(t, r, root, o)
			if attempts != 2 {
				t.Errorf("log read %d times, want 2", attempts)
			}
			got := capTestFlatten(t, r, m.Root.Subtree)
			content := string(capTestContent(t, r, got["log"]))
			// The second read saw the first append only.
			if content != "line 0\nline 1\n" || got["log"].Size != uint64(len(content)) {
				t.Errorf("log captured as %q (size %d)", content, got["log"].Size)
			}
			errs := capTestErrors(m)
			if len(errs) != 0 || !m.Complete {
				t.Errorf("errors %q, complete %v", errs, m.Complete)
			}
			// Appended to during both reads: the second read is kept as
			// the file's first 14 bytes (of 21 now), and the snapshot
			// says so (growing_test.go has the rest).
			var want []snapshot.CapturePrefix
			if tc.wantPrefix {
				want = []snapshot.CapturePrefix{{Path: "log", Size: 14, FileSize: 21}}
			}
			if !slices.Equal(m.Prefixes, want) {
				t.Errorf("prefixes %+v, want %+v", m.Prefixes, want)
			}
			if !tc.wantPrefix {
				capTestCompare(t, r, root, m)
			}
			snaptest.Check(t, r)
		})
	}
}

// A directory that goes between the stat of its parent's entries and its
// own listing, whether a worker lists it ahead of the walker or the walker
// does, is recorded as vanished and the rest is captured.
func TestCaptureVanishedDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{"keep": "kept"}
	for _, d := range []string{"a", "b", "c", "d", "e", "f"} {
		files[d+"/gone/file"] = "soon gone"
		files[d+"/stays/file"] = "here"
		files[d+"/z/deeper/file"] = "deep"
	}
	capTestWrite(t, root, files)
	r := capTestOpenRepo(t)
	o := capTestOptions(nil)
	var hit atomic.Int32
	o.hooks.listed = func(dir string) {
		if len(dir) == 1 && dir != "." {
			hit.Add(1)
			if err := os.RemoveAll(filepath.Join(root, dir, "gone")); err != nil {
				t.Error(err)
			}
		}
	}
	m := capTestCapture(t, r, root, o)
	if hit.Load() != 6 {
		t.Fatalf("hook hit %d times, want 6", hit.Load())
	}
	errs := capTestErrors(m)
	for _, d := range []string{"a", "b", "c", "d", "e", "f"} {
		if !strings.Contains(errs[d+"/gone"], "vanished") {
			t.Errorf("%s/gone: error %q", d, errs[d+"/gone"])
		}
	}
	if len(errs) != 6 || m.Complete {
		t.Errorf("complete %v, errors %q", m.Complete, errs)
	}
	// (The removals moved the directories' mtimes.)
	capTestCompare(t, r, root, m, "a", "b", "c", "d", "e", "f")
	snaptest.Check(t, r)
}

func TestCaptureUnreadable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads any file; TestCaptureUnreadableAsNobody covers this as root")
	}
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{"ok": "fine", "secret": "no", "locked/inside": "hidden"})
	if err := os.Chmod(filepath.Join(root, "secret"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(root, "locked"), 0o755) })
	r := capTestOpenRepo(t)
	m := capTestCapture(t, r, root, capTestOptions(nil))
	capTestCheckUnreadable(t, r, m)
}

// capTestCheckUnreadable checks a capture of a tree with "ok", "secret"
// (mode 000) and "locked/" (mode 000).
func capTestCheckUnreadable(t *testing.T, r blobLoaderRepo, m *snapshot.Manifest) {
	t.Helper()
	errs := capTestErrors(m)
	if m.Complete || !strings.Contains(errs["secret"], "permission denied") || !strings.Contains(errs["locked"], "permission denied") || len(errs) != 2 {
		t.Errorf("complete %v, errors %q", m.Complete, errs)
	}
	var names []string
	err := snapshot.LoadDir(context.Background(), r, blob.Workspace, m.Root.Subtree, func(n *snapshot.Node) error {
		names = append(names, string(n.Name))
		return nil
	})
	if err != nil || strings.Join(names, ",") != "ok" {
		t.Errorf("snapshot lists %q (%v), want only ok", names, err)
	}
}

type blobLoaderRepo = snapshot.BlobLoader

func TestCaptureFatal(t *testing.T) { // not parallel: it counts the process's descriptors
	r := capTestOpenRepo(t)
	if _, err := Run(context.Background(), r, filepath.Join(t.TempDir(), "missing"), capTestOptions(nil)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing root: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	capTestWrite(t, filepath.Dir(file), map[string]string{"file": "x"})
	if _, err := Run(context.Background(), r, file, capTestOptions(nil)); err == nil {
		t.Error("a file as root was captured")
	}
	if _, err := Run(context.Background(), r, t.TempDir(), Options{}); err == nil {
		t.Error("capture without workspace")
	}
	o := capTestOptions(nil)
	o.Excludes = []string{"[bad"}
	if _, err := Run(context.Background(), r, t.TempDir(), o); err == nil {
		t.Error("bad exclude pattern accepted")
	}

	// A repository that fails.
	closed := capTestOpenRepo(t)
	if err := closed.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), closed, file[:len(file)-len("/file")], capTestOptions(nil)); !errors.Is(err, repo.ErrClosed) {
		t.Errorf("capture into a closed repository: %v", err)
	}

	// Cancelled half way: an error, and no manifest. The files are spread
	// over nested directories, so some are being listed ahead of the
	// walker when it stops, and their descriptors must be let go.
	root := t.TempDir()
	files := map[string]string{}
	for i := range 50 {
		files[filepath.Join("d", string(rune('a'+i%3)), string(rune('a'+i%5)), string(rune('a'+i%26))+string(rune('a'+i/26)))] = strings.Repeat("z", i+1)
	}
	capTestWrite(t, root, files)
	ctx, cancel := context.WithCancel(context.Background())
	o = capTestOptions(nil)
	o.Readers = 1
	n := 0
	o.hooks.beforeOpen = func(string) {
		if n++; n == 10 {
			cancel()
		}
	}
	// A whole capture first, into a repository of its own: the process
	// opens the descriptors it keeps for good (the index's memory gauge,
	// /proc/self/statm) at its first capture.
	capTestCapture(t, capTestOpenRepo(t), root, capTestOptions(nil))
	fds := capTestOpenFds(t)
	if _, err := Run(ctx, r, root, o); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled capture: %v", err)
	}
	// Open packs are temp files the repository keeps until its next Flush.
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := capTestOpenFds(t); after > fds {
		t.Errorf("%d descriptors open after a cancelled capture, %d before", after, fds)
	}
	snaps, _, err := snapshot.List(context.Background(), r, "")
	if err != nil || len(snaps) != 0 {
		t.Errorf("after failed captures, %d snapshots (%v)", len(snaps), err)
	}
	snaptest.Check(t, r)
}

// capTestBadCache hands the capture the file cache records tamper makes
// of the stored ones, as a damaged or forged cache DB would.
type capTestBadCache struct {
	*index.DB
	tamper func(key, v []byte) []byte
	found  atomic.Int64
}

func (c *capTestBadCache) FileCacheGet(ws string, key []byte, fn func(v []byte)) error {
	return c.DB.FileCacheGet(ws, key, func(v []byte) {
		if v != nil {
			c.found.Add(1)
			v = c.tamper(key, v)
		}
		fn(v)
	})
}

func TestCaptureCacheNotTrustedBlindly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{"a": "aaaa", "b/c": "cccc"})
	capTestAge(t, root)
	r := capTestOpenRepo(t)
	o, read := capTestCacheOptions(r)
	capTestCapture(t, r, root, o)
	k, err := r.TierKeys(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := capCacheKeys(k, o.Workspace)
	other := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), k.IDKey)
	// reseal decodes a record found under key, lets edit change it, and
	// seals it again with with.
	reseal := func(with *crypt.TierKeys, key, v []byte, edit func(gen *uint64, e *capNamed)) []byte {
		plain, err := k.Open(nil, v, capRecordAAD(ws, key))
		if err != nil {
			t.Fatal(err)
		}
		gen, tree, rec, err := decodeRecord(plain)
		if err != nil {
			t.Fatal(err)
		}
		var names [][]byte
		var entries []*capEntry
		for i := range rec {
			edit(&gen, &rec[i])
			names, entries = append(names, rec[i].name), append(entries, &rec[i].e)
		}
		return with.Seal(nil, appendRecord(nil, gen, tree, names, entries), capRecordAAD(ws, key))
	}
	var first []byte // the first record found (the root's), handed for b's
	for name, tamper := range map[string]func(key, v []byte) []byte{
		// Damaged on disk: the seal does not open.
		"flipped bit": func(key, v []byte) []byte {
			v = slices.Clone(v)
			v[len(v)/2] ^= 1
			return v
		},
		// Written by someone without the key.
		"forged": func(key, v []byte) []byte { return reseal(other, key, v, func(*uint64, *capNamed) {}) },
		// Copied from one directory to another.
		"moved": func(key, v []byte) []byte {
			if first == nil {
				first = slices.Clone(v)
				return v
			}
			return first
		},
		// Sealed right, but the file is not the one remembered.
		"other inode": func(key, v []byte) []byte {
			return reseal(k, key, v, func(_ *uint64, e *capNamed) { e.e.Inode++ })
		},
		// Sealed right, naming a chunk the index lacks, stamped with an
		// older removal generation: its chunks are looked up.
		"missing chunk": func(key, v []byte) []byte {
			return reseal(k, key, v, func(gen *uint64, e *capNamed) { *gen ^= 2; e.e.Content = []blob.ID{{1, 2, 3}} })
		},
	} {
		read.Store(0)
		first = nil
		bad := &capTestBadCache{DB: r.Index(), tamper: tamper}
		o.Cache = bad
		m := capTestCapture(t, r, root, o)
		want := int64(8)
		if name == "moved" {
			want = 4 // the first record found, the root's, is handed as it is
		}
		if read.Load() != want || bad.found.Load() != 2 {
			t.Errorf("%s: read %d bytes after %d cache records found; want %d after 2", name, read.Load(), bad.found.Load(), want)
		}
		capTestCompare(t, r, root, m)
	}
}

// A file changed shortly before the capture began is read but not cached
// ("racily clean"): within 100 ms on a local filesystem with nanosecond
// timestamps, within 2 s elsewhere.
func TestCaptureRacyWindow(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{"fresh": "ffff"})
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, "fresh"), &st); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fine := capFineTimes(fd) && st.Ctim.Nsec != 0
	_ = unix.Close(fd)
	changed := time.Unix(0, max(st.Mtim.Nano(), st.Ctim.Nano()))
	for _, c := range []struct {
		after  time.Duration
		cached bool
	}{{50 * time.Millisecond, false}, {150 * time.Millisecond, fine}, {3 * time.Second, true}} {
		r := capTestOpenRepo(t)
		o, read := capTestCacheOptions(r)
		o.hooks.settled = false
		o.hooks.start = changed.Add(c.after)
		capTestCapture(t, r, root, o)
		read.Store(0)
		capTestCapture(t, r, root, o)
		if got := read.Load() == 0; got != c.cached {
			t.Errorf("capture %v after the change (fine timestamps: %v): cached %v, want %v", c.after, fine, got, c.cached)
		}
	}
}

func TestCaptureBindMountLoop(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{"a/file": "x"})
	loop := filepath.Join(root, "a", "loop")
	if err := os.Mkdir(loop, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(root, loop, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Skipf("cannot bind-mount (%v); the loop check is not tested", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(loop, unix.MNT_DETACH) })
	r := capTestOpenRepo(t)
	m := capTestCapture(t, r, root, capTestOptions(nil))
	errs := capTestErrors(m)
	if m.Complete || !strings.Contains(errs["a/loop"], "same directory as one of its parents") || len(errs) != 1 {
		t.Errorf("complete %v, errors %q", m.Complete, errs)
	}
	got := capTestFlatten(t, r, m.Root.Subtree)
	if len(got) != 2 || got["a/file"] == nil {
		t.Errorf("captured %v", got)
	}
}

func TestCaptureDirectoryMovedDuringWalk(t *testing.T) {
	t.Parallel()
	// The walker is deep below l0, whose descriptor it has closed; then l0
	// goes away and its child l1 moves to the root. Coming back up, the
	// walker cannot reopen l0: what it had of l0 stays, the rest is left
	// out with an error, and the capture goes on with the root.
	const depth = 2 * capMaxHeld
	root := t.TempDir()
	rel := ""
	for i := range depth {
		rel = filepath.Join(rel, "l"+strconv.Itoa(i))
	}
	files := map[string]string{"l0/zz-after": "left out", "zz-root": "kept"}
	for i := range 6 {
		files[filepath.Join(rel, "f"+strconv.Itoa(i))] = "deep"
	}
	capTestWrite(t, root, files)
	r := capTestOpenRepo(t)
	o := capTestOptions(nil)
	o.Readers = 1 // the walker blocks on the queue while the reader waits in the hook
	moved := false
	o.hooks.beforeOpen = func(p string) {
		if moved || !strings.HasSuffix(p, "/f0") {
			return
		}
		moved = true
		for _, mv := range [][2]string{{"l0", "gone"}, {"gone/l1", "l1"}} {
			if err := os.Rename(filepath.Join(root, mv[0]), filepath.Join(root, mv[1])); err != nil {
				t.Error(err)
			}
		}
	}
	m := capTestCapture(t, r, root, o)
	errs := capTestErrors(m)
	if m.Complete || !strings.Contains(errs["l0"], "moved during the capture") || len(errs) != 1 {
		t.Fatalf("complete %v, errors %q", m.Complete, errs)
	}
	got := capTestFlatten(t, r, m.Root.Subtree)
	if got["l0/zz-after"] != nil || got["zz-root"] == nil || got[filepath.Join(rel, "f5")] == nil {
		t.Errorf("captured %d entries; zz-after %v, zz-root %v", len(got), got["l0/zz-after"], got["zz-root"])
	}
	if c := capTestContent(t, r, got[filepath.Join(rel, "f5")]); string(c) != "deep" {
		t.Errorf("deep file holds %q", c)
	}
	snaptest.Check(t, r)
}
