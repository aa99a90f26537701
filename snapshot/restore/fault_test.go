package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/internal/nstest"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// rsOldTarget makes an existing target directory with content of its own
// and returns a check that it is exactly as it was.
func rsOldTarget(t *testing.T, parent string) (target string, check func()) {
	t.Helper()
	target = filepath.Join(parent, "target")
	if err := os.MkdirAll(filepath.Join(target, "old-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "old-dir", "old-file"), []byte("the tree before the restore"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snaptest.Dump(t, target, true)
	return target, func() {
		t.Helper()
		if after := snaptest.Dump(t, target, true); after != before {
			t.Errorf("target changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}
}

// rsMixedRepo is a new repository holding a snapshot of several files in
// a few directories, spread over several packs: the repository, the
// snapshot and what each file holds.
func rsMixedRepo(t *testing.T, files int, size int) (r *snaptest.Repo, m *snapshot.Manifest, want map[string][]byte) {
	t.Helper()
	r = snaptest.NewRepo(t)
	want = map[string][]byte{}
	var dirs []snapshot.Node
	for d := range 3 {
		var nodes []snapshot.Node
		for f := range files / 3 {
			name := string(rune('a'+d)) + "/f" + string(rune('a'+f%26)) + string(rune('a'+f/26))
			data := make([]byte, size+f*100)
			rsRandom(data, uint64(d*1000+f+1))
			want[name] = data
			nodes = append(nodes, r.File(t, filepath.Base(name), data))
		}
		dirs = append(dirs, r.Dir(t, string(rune('a'+d)), nodes...))
	}
	return r, r.Manifest(t, r.Dir(t, "root", dirs...), true), want
}

func rsCheckFiles(t *testing.T, target string, want map[string][]byte) {
	t.Helper()
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(target, name))
		if err != nil || string(got) != string(data) {
			t.Errorf("%s: %d bytes (err %v), want %d", name, len(got), err, len(data))
		}
	}
}

func TestRestoreExistingTarget(t *testing.T) {
	t.Parallel()
	r, m, want := rsMixedRepo(t, 9, 5000)
	parent := t.TempDir()
	_, checkSentinel := rsSentinel(t, parent)
	target, checkTarget := rsOldTarget(t, parent)

	_, err := Run(t.Context(), r.Repository, m, Options{Target: target})
	if !errors.Is(err, ErrTargetExists) {
		t.Fatalf("restore over an existing target without Replace: %v", err)
	}
	checkTarget()
	rsNoLeftovers(t, parent)

	res, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	rsCheckFiles(t, target, want)
	if _, err := os.Stat(filepath.Join(target, "old-dir")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old content still in the target: %v", err)
	}
	if l := snaptest.Leftovers(t, parent); len(l) > 0 || res.Leftover != "" {
		t.Errorf("left behind: %v %q", l, res.Leftover)
	}
	checkSentinel()

	// A symlink to a directory is not a target Replace swaps.
	link := filepath.Join(parent, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: link, Replace: true}); err == nil {
		t.Error("Replace of a symlink target accepted")
	}
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(parent, "no", "such", "parent")}); err == nil {
		t.Error("restore under a missing parent accepted")
	}
}

// TestRestoreReplaceFallback simulates a filesystem without
// RENAME_EXCHANGE: the two-step fallback replaces the target, and when its
// second rename fails the old tree is put back.
func TestRestoreReplaceFallback(t *testing.T) {
	t.Parallel()
	r, m, want := rsMixedRepo(t, 6, 3000)

	parent := t.TempDir()
	target, _ := rsOldTarget(t, parent)
	var renames []string
	hooks := &stageHooks{renameat2: rsNoExchange, renameat: func(ofd int, op string, nfd int, np string) error {
		renames = append(renames, op+" -> "+np)
		return unix.Renameat(ofd, op, nfd, np)
	}}
	res, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true, hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("renames: %q", renames)
	if len(renames) != 2 || !strings.HasPrefix(renames[0], "target -> .lifeboat-old-") || !strings.HasSuffix(renames[1], " -> target") {
		t.Errorf("fallback renames: %q", renames)
	}
	rsCheckFiles(t, target, want)
	if l := snaptest.Leftovers(t, parent); len(l) > 0 || res.Leftover != "" {
		t.Errorf("left behind: %v %q", l, res.Leftover)
	}

	parent = t.TempDir()
	target, checkTarget := rsOldTarget(t, parent)
	n := 0
	hooks = &stageHooks{renameat2: rsNoExchange, renameat: func(ofd int, op string, nfd int, np string) error {
		if n++; n == 2 {
			return unix.EIO
		}
		return unix.Renameat(ofd, op, nfd, np)
	}}
	_, err = Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true, hooks: hooks})
	if !errors.Is(err, unix.EIO) {
		t.Fatalf("failed second rename: %v", err)
	}
	t.Logf("error: %v", err)
	checkTarget()
	rsNoLeftovers(t, parent)
}

// rsPackOf returns the path of the pack holding a file's first chunk.
func packOf(r *snaptest.Repo, t *testing.T, n snapshot.Node) (string, uint32) {
	t.Helper()
	loc, ok, err := r.LookupBlob(blob.Workspace, blob.Data, n.Content[0])
	if err != nil || !ok {
		t.Fatalf("chunk of %s: %v %v", n.Name, ok, err)
	}
	name := loc.Pack.String()
	return filepath.Join(r.Path, "data", name[:2], name), loc.Offset
}

// TestRestoreDamagedRepository: a missing pack, a corrupt chunk, a chunk
// or tree not in the index. Each fails the restore with an error naming
// the files affected, the target stays as it was, nothing is left.
func TestRestoreDamagedRepository(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	// Each case has content of its own: content-defined chunks of similar
	// data would dedup against the pack an earlier case deleted.
	victimData := func(seed uint64) []byte {
		b := make([]byte, 300<<10)
		rsRandom(b, seed)
		return b
	}
	var ghost blob.ID
	ghost[0] = 0xee
	cases := []struct {
		name   string
		damage func(t *testing.T) (snapshot.Node, func())
		is     error
		names  string
	}{
		{"missing pack", func(t *testing.T) (snapshot.Node, func()) {
			n := r.File(t, "victim", victimData(42))
			return n, func() {
				if err := r.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				p, _ := packOf(r, t, n)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}, repo.ErrPackMissing, `"dir/victim"`},
		{"corrupt chunk", func(t *testing.T) (snapshot.Node, func()) {
			n := r.File(t, "victim", victimData(43))
			return n, func() {
				if err := r.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				p, off := packOf(r, t, n)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				b[off+40] ^= 0x10
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}, repo.ErrCorrupt, `"dir/victim"`},
		{"chunk not indexed", func(t *testing.T) (snapshot.Node, func()) {
			return snapshot.Node{Name: []byte("victim"), Type: snapshot.TypeFile, Size: 10, Content: []blob.ID{ghost}}, func() {}
		}, repo.ErrBlobNotFound, `"dir/victim"`},
		{"tree not indexed", func(t *testing.T) (snapshot.Node, func()) {
			return snapshot.Node{Name: []byte("victim"), Type: snapshot.TypeDir, Subtree: []blob.ID{ghost}}, func() {}
		}, repo.ErrBlobNotFound, `"dir/victim"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, damage := tc.damage(t)
			bystander := r.File(t, "bystander", []byte(tc.name))
			m := r.Manifest(t, r.Dir(t, "root", r.Dir(t, "dir", n, bystander), r.File(t, "top", []byte{byte(i)})), true)
			damage()
			parent := t.TempDir()
			_, checkSentinel := rsSentinel(t, parent)
			target, checkTarget := rsOldTarget(t, parent)
			_, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true})
			t.Logf("error: %v", err)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.names) {
				t.Errorf("got %v, want %v naming %s", err, tc.is, tc.names)
			}
			checkTarget()
			checkSentinel()
			rsNoLeftovers(t, parent)
		})
	}
}

// TestRestoreCancelled cancels the context as the first file finishes.
func TestRestoreCancelled(t *testing.T) {
	t.Parallel()
	r, m, _ := rsMixedRepo(t, 30, 100<<10)
	parent := t.TempDir()
	target, checkTarget := rsOldTarget(t, parent)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	prog := &rsProgress{onDone: cancel}
	_, err := Run(ctx, r.Repository, m, Options{Target: target, Replace: true, Progress: prog, Workers: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled restore: %v", err)
	}
	if prog.files == 0 || prog.files >= 30 {
		t.Errorf("cancelled after %d files; want the cancel mid-way", prog.files)
	}
	checkTarget()
	rsNoLeftovers(t, parent)
}

func TestRestoreReadOnlyFilesystem(t *testing.T) {
	t.Parallel()
	r, m, _ := rsMixedRepo(t, 3, 1000)
	readOnly := func(mnt string) {
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	// A new target on a read-only filesystem.
	mnt := nstest.Tmpfs(t, "size=1m")
	readOnly(mnt)
	_, err := Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(mnt, "target")})
	t.Logf("error: %v", err)
	if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), mnt) {
		t.Errorf("restore onto a read-only filesystem: %v", err)
	}
	// An existing target on a filesystem remounted read-only.
	mnt = nstest.Tmpfs(t, "size=1m")
	target, checkTarget := rsOldTarget(t, mnt)
	readOnly(mnt)
	_, err = Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true})
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("replace on a read-only filesystem: %v", err)
	}
	checkTarget()
	rsNoLeftovers(t, mnt)
}

// TestRestoreDiskFull restores 6 MiB into a 2 MiB filesystem.
func TestRestoreDiskFull(t *testing.T) {
	t.Parallel()
	r, m, _ := rsMixedRepo(t, 12, 500<<10)
	mnt := nstest.Tmpfs(t, "size=2m")
	_, checkSentinel := rsSentinel(t, mnt)
	target, checkTarget := rsOldTarget(t, mnt)
	var before unix.Statfs_t
	if err := unix.Statfs(mnt, &before); err != nil {
		t.Fatal(err)
	}
	_, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true})
	t.Logf("error: %v", err)
	var re *Error
	if !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &re) || len(re.Paths) != 1 {
		t.Fatalf("restore onto a full disk: %v", err)
	}
	checkTarget()
	checkSentinel()
	rsNoLeftovers(t, mnt)
	var after unix.Statfs_t
	if err := unix.Statfs(mnt, &after); err != nil {
		t.Fatal(err)
	}
	if after.Bfree != before.Bfree {
		t.Errorf("free blocks %d before, %d after the failed restore", before.Bfree, after.Bfree)
	}
	// Without Replace, into a new target on the full disk.
	_, err = Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(mnt, "new")})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("new target on a full disk: %v", err)
	}
	ents, _ := os.ReadDir(mnt)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"sentinel", "target"}) {
		t.Errorf("filesystem holds %q after failed restores", names)
	}
}

// TestRestoreReadsEachRangeOnce: files that share chunks, spread over
// several packs, are restored with one Load per pack run; no byte of a
// pack is read twice.
func TestRestoreReadsEachRangeOnce(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	shared := make([]byte, 200<<10)
	rsRandom(shared, 99)
	sharedID := r.SaveChunk(t, shared)
	var nodes []snapshot.Node
	for i := range 40 {
		own := make([]byte, 50<<10)
		rsRandom(own, uint64(i+1000))
		n := snapshot.Node{Name: []byte(fmt.Sprintf("f%02d", i)), Type: snapshot.TypeFile, Mode: 0o644,
			Content: []blob.ID{sharedID, r.SaveChunk(t, own), sharedID}, Size: uint64(2*len(shared) + len(own))}
		nodes = append(nodes, n)
	}
	m := r.Manifest(t, r.Dir(t, "root", nodes...), true)
	r2, reads := r.Reopen(t)
	if _, err := Run(t.Context(), r2, m, Options{Target: filepath.Join(t.TempDir(), "t")}); err != nil {
		t.Fatal(err)
	}
	loads := 0
	ranges := reads.Ranges()
	for pk, rs := range ranges {
		slices.SortFunc(rs, func(a, b [2]int64) int { return int(a[0] - b[0]) })
		for i := 1; i < len(rs); i++ {
			if rs[i][0] < rs[i-1][1] {
				t.Errorf("pack %s: ranges %v and %v overlap", pk[:8], rs[i-1], rs[i])
			}
		}
		loads += len(rs)
	}
	// 40 x 50 KiB + 200 KiB in 1 MiB packs: a handful of packs, one run each.
	if len(ranges) == 0 || loads != len(ranges) {
		t.Errorf("%d loads from %d packs, want one per pack", loads, len(ranges))
	}
	t.Logf("%d packs, %d loads", len(ranges), loads)
}
