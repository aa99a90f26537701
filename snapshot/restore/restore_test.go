package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/internal/osutil"
	"lifeboat/internal/storetest"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

const rsGiB = 1 << 30

// rsMakeSource builds a workspace with every kind of entry restore
// handles, with distinct metadata, and returns its path.
func rsMakeSource(t *testing.T, parent string) string {
	t.Helper()
	src := filepath.Join(parent, "src")
	root := os.Geteuid() == 0
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel string, data []byte, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(src, rel)
		must(os.WriteFile(p, data, 0o600))
		must(os.Chmod(p, mode))
	}
	must(os.MkdirAll(filepath.Join(src, "sub", "sgid-dir"), 0o755))
	must(os.Mkdir(filepath.Join(src, "ro-dir"), 0o755))
	must(os.Mkdir(filepath.Join(src, "d\xc3\x28"), 0o755))
	write("empty", nil, 0o644)
	write("small.txt", []byte("hello, restore\n"), 0o640)
	big := make([]byte, 20<<20+12345)
	rsRandom(big, 1)
	copy(big[5<<20:], bytes.Repeat([]byte("compressible text "), 1<<16)) // some zstd-friendly content
	write("big.bin", big, 0o644)
	write("hl-a", []byte("shared by two names"), 0o600)
	must(os.Link(filepath.Join(src, "hl-a"), filepath.Join(src, "sub", "hl-b")))
	write("bad\xff\xfe.txt", []byte("invalid utf-8 name"), 0o644)
	write("d\xc3\x28/inner", []byte("in a badly named dir"), 0o644)
	write("ro-dir/file", []byte("in a read-only dir"), 0o400)
	write("sub/suid", []byte("#!/bin/sh\n"), 0o755)
	write("zeros-dense", make([]byte, 3<<20), 0o644) // written zeros: restored as holes
	// A 1 GiB sparse file with three small data blocks.
	sp, err := os.Create(filepath.Join(src, "sparse"))
	must(err)
	must(sp.Truncate(rsGiB))
	for _, off := range []int64{0, 100 << 20, rsGiB - 4096} {
		_, err := sp.WriteAt(bytes.Repeat([]byte{0xab}, 4096), off)
		must(err)
	}
	must(sp.Close())
	must(os.Symlink("small.txt", filepath.Join(src, "link-rel")))
	must(os.Symlink("/nonexistent/abs/target", filepath.Join(src, "link-abs")))
	must(os.Symlink("../src/nothere", filepath.Join(src, "sub", "link-dangling")))
	must(unix.Mkfifo(filepath.Join(src, "fifo"), 0o620))
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	must(err)
	must(unix.Bind(sock, &unix.SockaddrUnix{Name: filepath.Join(src, "sock")}))
	must(unix.Close(sock))
	if root {
		must(unix.Mknod(filepath.Join(src, "devnull"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	}
	for _, x := range []struct{ p, name, val string }{
		{"small.txt", "user.comment", "a note"},
		{"small.txt", "user.empty", ""},
		{"sub", "user.dir", "on a directory"},
		{"bad\xff\xfe.txt", "user.bin", "\x00\xff"},
	} {
		must(unix.Lsetxattr(filepath.Join(src, x.p), x.name, []byte(x.val), 0))
	}
	// Owners (as root), then special modes (chown clears setuid).
	if root {
		_ = filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
			must(err)
			must(os.Lchown(p, 1234, 5678))
			return nil
		})
		must(os.Lchown(filepath.Join(src, "small.txt"), 0, 0))
		must(os.Lchown(filepath.Join(src, "link-rel"), 4321, 8765))
	}
	must(os.Chmod(filepath.Join(src, "sub", "suid"), 0o4755))
	must(os.Chmod(filepath.Join(src, "sub", "sgid-dir"), 0o2755))
	must(os.Chmod(filepath.Join(src, "sub"), 0o1777))
	must(os.Chmod(filepath.Join(src, "ro-dir"), 0o500))
	must(os.Chmod(src, 0o750))
	// Distinct mtimes, deepest first so directories keep theirs.
	var paths []string
	_ = filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		paths = append(paths, p)
		return nil
	})
	slices.Reverse(paths)
	for i, p := range paths {
		ns := snaptest.Mtime + int64(i)*1_000_000_007
		ts := []unix.Timespec{unix.NsecToTimespec(ns), unix.NsecToTimespec(ns)}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
	}
	return src
}

func TestRestoreRoundTrip(t *testing.T) { storetest.Each(t, testRestoreRoundTrip) }

func testRestoreRoundTrip(t *testing.T, s storetest.Store) {
	base := t.TempDir()
	src := rsMakeSource(t, base)
	r := snaptest.NewRepoIn(t, s)
	m := r.SnapshotOf(t, src)
	parent := filepath.Join(base, "out")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	_, checkSentinel := rsSentinel(t, parent)
	target := filepath.Join(parent, "target")
	prog := &rsProgress{}
	start := time.Now()
	res, err := Run(t.Context(), r.Repository, m, Options{Target: target, Progress: prog})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored in %v: %+v", time.Since(start), res)
	if want, got := snaptest.Dump(t, src, true), snaptest.Dump(t, target, true); want != got {
		t.Fatalf("restored tree differs\nsource:\n%s\nrestored:\n%s", want, got)
	}
	wantSkipped := []string{"sock"}
	if os.Geteuid() == 0 {
		wantSkipped = []string{"devnull", "sock"}
	}
	if !slices.Equal(res.Skipped, wantSkipped) {
		t.Errorf("Skipped = %q, want %q", res.Skipped, wantSkipped)
	}
	for _, p := range wantSkipped {
		if _, ok := prog.errs[p]; !ok {
			t.Errorf("skipped %s not reported to Progress.Error (got %v)", p, prog.errs)
		}
		if _, err := os.Lstat(filepath.Join(target, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("skipped %s exists in the target: %v", p, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(target, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != rsGiB || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse file: size %d, %d bytes allocated; want 1 GiB in under 1 MiB", st.Size, st.Blocks*512)
	}
	if err := unix.Stat(filepath.Join(target, "zeros-dense"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks != 0 {
		t.Errorf("all-zero file: %d blocks allocated, want a hole", st.Blocks)
	}
	if res.Dirs != 5 || res.Bytes != uint64(rsGiB+20<<20+12345+3<<20+len("hello, restore\n")+len("shared by two names")+len("invalid utf-8 name")+len("in a badly named dir")+len("in a read-only dir")+len("#!/bin/sh\n")) {
		t.Errorf("result counts: %+v", res)
	}
	if prog.files != 10 || prog.bytes != res.Bytes {
		t.Errorf("progress saw %d files, %d bytes; want 10, %d", prog.files, prog.bytes, res.Bytes)
	}
	if _, err := os.Stat(res.Staging); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging %s still exists: %v", res.Staging, err)
	}
	rsNoLeftovers(t, parent)
	checkSentinel()
}

// TestRestoreSharedChunks restores many files built from the same few
// chunks at different offsets, with several writers, and checks them.
func TestRestoreSharedChunks(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	chunks := make([][]byte, 5)
	ids := make([]snapshot.Node, 0)
	cids := make([]blob.ID, len(chunks))
	for i := range chunks {
		chunks[i] = make([]byte, 1000+i*7919)
		rsRandom(chunks[i], uint64(i+10))
		cids[i] = r.SaveChunk(t, chunks[i])
	}
	want := map[string][]byte{}
	for f := range 40 {
		var data []byte
		n := snapshot.Node{Name: []byte("f" + string(rune('a'+f%26)) + string(rune('0'+f/26))), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: snaptest.Mtime}
		for k := range 1 + f%7 {
			c := (f + k*3) % len(chunks)
			n.Content = append(n.Content, cids[c])
			data = append(data, chunks[c]...)
		}
		n.Size = uint64(len(data))
		want[string(n.Name)] = data
		ids = append(ids, n)
	}
	m := r.Manifest(t, r.Dir(t, "root", ids...), true)
	target := filepath.Join(t.TempDir(), "t")
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target, Workers: 8}); err != nil {
		t.Fatal(err)
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(target, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes, err %v; want %d bytes", name, len(got), err, len(data))
		}
	}
}

// TestRestoreIncludes restores a subset: included subtrees and files,
// their parent directories, and a hard link whose first name is outside
// the subset becomes a copy.
func TestRestoreIncludes(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	a := r.File(t, "a", []byte("first name of a hard link"))
	root := r.Dir(t, "root",
		a,
		r.Dir(t, "keep",
			r.File(t, "k1", []byte("k1")),
			r.Dir(t, "deep", r.File(t, "k2", []byte("k2"))),
			snapshot.Node{Name: []byte("link"), Type: snapshot.TypeHardlink, LinkPath: []byte("a")},
		),
		r.Dir(t, "part", r.File(t, "one", []byte("one")), r.File(t, "two", []byte("two"))),
		r.Dir(t, "skip", r.File(t, "s", []byte("s"))),
	)
	m := r.Manifest(t, root, true)
	target := filepath.Join(t.TempDir(), "t")
	res, err := Run(t.Context(), r.Repository, m, Options{Target: target, Includes: []string{"keep", "/part/two"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	_ = filepath.WalkDir(target, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(target, p)
		got = append(got, rel)
		return nil
	})
	want := []string{".", "keep", "keep/deep", "keep/deep/k2", "keep/k1", "keep/link", "part", "part/two"}
	if !slices.Equal(got, want) {
		t.Fatalf("restored %q, want %q (result %+v)", got, want, res)
	}
	if b, _ := os.ReadFile(filepath.Join(target, "keep/link")); string(b) != "first name of a hard link" {
		t.Errorf("hard link copy holds %q", b)
	}
	// Nested includes are fine; an include below one that matched must
	// still exist.
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(t.TempDir(), "t"), Includes: []string{"keep", "keep/deep/k2"}}); err != nil {
		t.Errorf("nested includes: %v", err)
	}
	_, err = Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(t.TempDir(), "t"), Includes: []string{"keep", "keep/nothere"}})
	if err == nil || !strings.Contains(err.Error(), "keep/nothere") {
		t.Errorf("nested include of a missing path: %v", err)
	}
	_, err = Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(t.TempDir(), "t"), Includes: []string{"keep/nothere"}})
	if err == nil || !strings.Contains(err.Error(), "keep/nothere") {
		t.Errorf("include of a missing path: %v", err)
	}
	_, err = Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(t.TempDir(), "t"), Includes: []string{"keep/../skip"}})
	if err == nil {
		t.Error("include with .. accepted")
	}
}

// TestRestoreDeepTree restores a chain of 10,000 directories, far deeper than
// PATH_MAX allows as one path, and checks it through directory fds.
func TestRestoreDeepTree(t *testing.T) {
	t.Parallel()
	const depth = 10000 // the 10,000 levels
	r := snaptest.NewRepo(t)
	n := r.File(t, "leaf", []byte("at the bottom"))
	for range depth {
		n = r.Dir(t, "dd", n)
	}
	m := r.Manifest(t, r.Dir(t, "root", n), true)
	target := filepath.Join(t.TempDir(), "t")
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target}); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(target, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		next, err := unix.Openat(fd, "dd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	defer unix.Close(fd)
	lf, err := unix.Openat(fd, "leaf", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lf)
	buf := make([]byte, 64)
	k, _ := unix.Read(lf, buf)
	if string(buf[:k]) != "at the bottom" {
		t.Errorf("leaf holds %q", buf[:k])
	}
}

func TestRestoreEmptyRoot(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	m := r.Manifest(t, r.Dir(t, "root"), true)
	target := filepath.Join(t.TempDir(), "t")
	res, err := Run(context.Background(), r.Repository, m, Options{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(target); err != nil || len(ents) != 0 || res.Dirs != 1 {
		t.Errorf("empty snapshot restored as %v, %v (%+v)", ents, err, res)
	}
}

// TestRestoreModes restores files whose modes are set at creation (no
// setuid/setgid/sticky bit, owner read-write, untouched by the umask) and
// files that need an fchmod after, empty and not, one ending in a hole;
// every mode comes back exact and every size and content too.
func TestRestoreModes(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	modes := []uint32{0o600, 0o644, 0o664, 0o666, 0o777, 0o755, 0o400, 0o444, 0o200, 0o000, 0o4755, 0o2755, 0o1777}
	for i, m := range modes {
		for _, content := range []string{"", "data"} {
			p := filepath.Join(src, fmt.Sprintf("f%d-%o-%d", i, m, len(content)))
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, osutil.FileMode(m)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tail := filepath.Join(src, "trailing-hole")
	if err := os.WriteFile(tail, []byte("x"), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(tail, 3<<20); err != nil {
		t.Fatal(err)
	}
	target := rsRestoreExact(t, src, filepath.Join(base, "out"))
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		var a, b unix.Stat_t
		if err := unix.Lstat(filepath.Join(src, e.Name()), &a); err != nil {
			t.Fatal(err)
		}
		if err := unix.Lstat(filepath.Join(target, e.Name()), &b); err != nil {
			t.Fatal(err)
		}
		if a.Mode != b.Mode || a.Size != b.Size {
			t.Errorf("%s: mode %o size %d, want %o %d", e.Name(), b.Mode, b.Size, a.Mode, a.Size)
		}
	}
}

// TestRestoreReadOnlyFiles restores files the owner may not write, empty,
// of one chunk and of several, with and without a user.* extended
// attribute: those written through the descriptor that creates them are
// created with their final mode, the others 0600 and chmodded at the end.
// Each comes back exact, as root and (TestRestoreReadOnlyFilesNonRoot)
// as a user whom the permission bits bind.
func TestRestoreReadOnlyFiles(t *testing.T) {
	t.Parallel()
	if os.Getenv(rsUnprivilegedEnv) == "" && os.Geteuid() != 0 {
		t.Skip("run through TestRestoreReadOnlyFilesNonRoot")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 6<<20) // several chunks
	rsRandom(big, 7)
	for _, m := range []os.FileMode{0o400, 0o444, 0o555, 0o500} {
		for _, content := range [][]byte{nil, []byte("data"), big} {
			for _, xattr := range []bool{false, true} {
				p := filepath.Join(src, fmt.Sprintf("f-%o-%d-%t", m, len(content), xattr))
				if err := os.WriteFile(p, content, 0o600); err != nil {
					t.Fatal(err)
				}
				if xattr {
					if err := unix.Setxattr(p, "user.restore-test", []byte("value"), 0); err != nil {
						t.Skipf("no user.* extended attributes here: %v", err)
					}
				}
				if err := os.Chmod(p, m); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	rsRestoreExact(t, src, filepath.Join(base, "out"))
}

// TestRestoreReadOnlyFilesNonRoot runs TestRestoreReadOnlyFiles as user
// nobody.
func TestRestoreReadOnlyFilesNonRoot(t *testing.T) {
	t.Parallel()
	rsRunAsNobody(t, "TestRestoreReadOnlyFiles")
}
