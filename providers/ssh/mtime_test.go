package ssh

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/providers/providertest"
)

// nsTree writes into dir files, nested directories, a symlink, a fifo and
// a second name of a file, and gives every entry (the root too) its own
// mtime with nanoseconds, none on a second's last nanosecond; children
// before parents, so a child's does not move its parent's.
func nsTree(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "d", "e"), 0o755))
	must(os.Mkdir(filepath.Join(dir, "quiet"), 0o755))
	for _, rel := range []string{"a.txt", "d/b.txt", "d/e/f.txt", "sp ace", "quiet/q"} {
		must(os.WriteFile(filepath.Join(dir, rel), []byte("body of "+rel), 0o644))
	}
	must(os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "d", "a-link")))
	must(os.Symlink("../a.txt", filepath.Join(dir, "d", "to-a")))
	providertest.MakeFifo(t, filepath.Join(dir, "d", "pipe"), 0o600)
	base := time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC)
	order := []string{"d/e/f.txt", "d/e", "d/b.txt", "d/to-a", "d/pipe", "a.txt", "sp ace", "quiet/q", "quiet", "d", "."}
	for i, rel := range order {
		setMtime(t, filepath.Join(dir, rel), base.Add(time.Duration(i)*(time.Hour+time.Microsecond+7)))
	}
}

// setMtime sets p's atime and mtime to mt, of a symlink itself.
func setMtime(t *testing.T, p string, mt time.Time) {
	t.Helper()
	ts := unix.NsecToTimespec(mt.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

// mtimes is the mtime of every entry under dir (the root as "."),
// symlinks' own.
func mtimes(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fi.ModTime()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameMtimes fails t unless got has want's paths with want's mtimes,
// truncated to whole seconds when whole is set.
func sameMtimes(t *testing.T, what string, want, got map[string]time.Time, whole bool) {
	t.Helper()
	var bad []string
	for rel, w := range want {
		if whole {
			w = w.Truncate(time.Second)
		}
		switch g, ok := got[rel]; {
		case !ok:
			bad = append(bad, rel+": missing")
		case !g.Equal(w):
			bad = append(bad, rel+": mtime "+g.UTC().Format(time.RFC3339Nano)+", want "+w.UTC().Format(time.RFC3339Nano))
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok {
			bad = append(bad, rel+": not in the source")
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%s:\n  %s", what, strings.Join(bad, "\n  "))
	}
}

// TestMirrorKeepsNanosecondMtimes: on a host with GNU find the mirror's
// files, directories, symlink and fifo have the host's mtimes to the
// nanosecond; a later ReadFiles follows an mtime that moved by
// nanoseconds only (same size, same second) and copies nothing else
// again; WriteFiles of the mirror gives the host the same mtimes back.
func TestMirrorKeepsNanosecondMtimes(t *testing.T) {
	_, cfg := setup(t)
	p := mustNew(t, cfg)
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	dir := filepath.Join(cfg.Root, string(id))
	nsTree(t, dir)
	m := read(t, p, id)
	sameMtimes(t, "first mirror", mtimes(t, dir), mtimes(t, m), false)
	unchanged := inode(t, filepath.Join(m, "d/b.txt"))

	// Only nanoseconds move: a file, the symlink, a directory whose
	// entries are unchanged, and the root.
	for _, rel := range []string{"d/e/f.txt", "d/to-a", "quiet", "."} {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		mt := fi.ModTime().Add(1)
		if mt.Unix() != fi.ModTime().Unix() {
			t.Fatalf("%s: %v is a second's last nanosecond", rel, fi.ModTime())
		}
		setMtime(t, filepath.Join(dir, rel), mt)
	}
	m = read(t, p, id)
	sameMtimes(t, "mirror after nanosecond changes", mtimes(t, dir), mtimes(t, m), false)
	if inode(t, filepath.Join(m, "d/b.txt")) != unchanged {
		t.Fatal("an unchanged file was transferred again")
	}
	if inode(t, filepath.Join(m, "a.txt")) != inode(t, filepath.Join(m, "d/a-link")) {
		t.Fatal("the hard link was split")
	}

	// Back to the host: the staging tree has the same mtimes.
	staging, err := p.WriteFiles(ctx, id, m)
	if err != nil {
		t.Fatal(err)
	}
	sameMtimes(t, "WriteFiles of the mirror", mtimes(t, dir), mtimes(t, staging), false)
}

// TestHostWithoutFindMirrorsWholeSeconds: without GNU find the mirror has
// SFTP's whole seconds, symlinks included.
func TestHostWithoutFindMirrorsWholeSeconds(t *testing.T) {
	_, cfg := setup(t)
	p := mustNew(t, cfg)
	p.limitHost = func(h hostSupport) hostSupport { h.find = false; return h }
	id := providertest.MustCreate(t, p, "k")
	dir := filepath.Join(cfg.Root, string(id))
	nsTree(t, dir)
	m := read(t, p, id)
	sameMtimes(t, "mirror without GNU find", mtimes(t, dir), mtimes(t, m), true)
}

// TestParseFindRealOutput: the installed GNU find's findFormat records
// of a tree with odd names, a hard link, a symlink, a fifo, and mtimes
// with nanoseconds, before 1970 too, parse back to what Lstat says.
func TestParseFindRealOutput(t *testing.T) {
	if err := exec.Command("find", ".", "-maxdepth", "0", "-printf", "").Run(); err != nil {
		t.Skip("no GNU find here")
	}
	dir := t.TempDir()
	nsTree(t, dir)
	for _, n := range []string{"new\nline", "pre-1970", "last-ns", "first-ns"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setMtime(t, filepath.Join(dir, "pre-1970"), time.Date(1960, 3, 4, 5, 6, 7, 500000000, time.UTC))
	setMtime(t, filepath.Join(dir, "last-ns"), time.Unix(1614834367, 999999999))
	setMtime(t, filepath.Join(dir, "first-ns"), time.Unix(1614834367, 1))
	setMtime(t, dir, time.Unix(-1, 900000000))
	cmd := exec.Command("find", ".", "-printf", findFormat)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	entries, groups := map[string]hostEntry{}, map[string]string{}
	if err := parseFind(bufio.NewReader(bytes.NewReader(append(out, 0))), entries, groups); err != nil {
		t.Fatal(err)
	}
	want := mtimes(t, dir)
	got := map[string]time.Time{}
	for rel, e := range entries {
		got[rel] = e.mtime
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if e.typ != findType(fi.Mode()) || (fi.Mode().IsRegular() && e.size != fi.Size()) {
			t.Errorf("%q: type %c size %d, want %c %d", rel, e.typ, e.size, findType(fi.Mode()), fi.Size())
		}
	}
	sameMtimes(t, "find's mtimes\n"+strings.ReplaceAll(string(out), "\x00", "\n"), want, got, false)
	if len(groups) != 2 || groups["a.txt"] == "" || groups["a.txt"] != groups["d/a-link"] {
		t.Fatalf("groups = %q, want a.txt and d/a-link together", groups)
	}
}
