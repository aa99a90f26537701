package providertest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// Support is what p says WriteFiles keeps: its FileSupporter's answer, or
// the zero value for an adapter that does not say.
func Support(t testing.TB, p providers.Provider) providers.FileSupport {
	t.Helper()
	fsr, ok := p.(providers.FileSupporter)
	if !ok {
		return providers.FileSupport{}
	}
	keep, err := fsr.FileSupport(context.Background())
	if err != nil {
		t.Fatalf("FileSupport: %v", err)
	}
	return keep
}

// FidelityTree is what RichTree built: which parts the local filesystem
// allowed, so a comparison checks only those.
type FidelityTree struct {
	Xattrs bool // user.* attributes were set (the filesystem takes them)
	Sparse bool // sparse.img has a hole
	Fifo   bool // pipe is a fifo
	Owners bool // owned has uid 4242, gid 4243 (only as root)
}

// RichTree writes into dir a tree with everything a faithful copy keeps:
// a file with three hard links (one in another directory), user.*
// attributes on a file and a directory (binary values, an empty one), a
// fifo (when fifo is set), a sparse file, setuid, setgid and sticky
// modes, a read-only directory, symlinks, distinct nanosecond mtimes on
// every file and directory, and as root a file owned by someone else.
func RichTree(t testing.TB, dir string, fifo bool) FidelityTree {
	t.Helper()
	var ft FidelityTree
	write := func(rel, body string, mode fs.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("data/a", "shared by three names\n", 0o640)
	write("bin/suid", "#!/bin/sh\n", 0o755|fs.ModeSetuid)
	write("bin/sgid", "#!/bin/sh\n", 0o750|fs.ModeSetgid)
	write("ro/inside", "under a read-only directory", 0o444)
	write("x/attr.txt", "has attributes", 0o600)
	write("owned", "someone else's", 0o644)
	for _, l := range [][2]string{{"data/a", "data/sub/b"}, {"data/a", "c-link"}} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(l[1])), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(dir, l[0]), filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []struct {
		rel  string
		mode fs.FileMode
	}{{"shared", 0o775 | fs.ModeSetgid}, {"tmp", 0o777 | fs.ModeSticky}} {
		if err := os.Mkdir(filepath.Join(dir, d.rel), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, d.rel), d.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../data/a", filepath.Join(dir, "x", "to-a")); err != nil {
		t.Fatal(err)
	}
	// sparse.img: 4 MiB, data in its first and its fourth MiB only.
	sp, err := os.Create(filepath.Join(dir, "sparse.img"))
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 3 << 20} {
		if _, err := sp.WriteAt([]byte(strings.Repeat("data", 1024)), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.Truncate(4 << 20); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	if h, err := firstHole(filepath.Join(dir, "sparse.img")); err == nil && h < 4<<20 {
		ft.Sparse = true
	}
	if fifo {
		MakeFifo(t, filepath.Join(dir, "pipe"), 0o640)
		ft.Fifo = true
	}
	if UserXattrs(t, dir) {
		for _, x := range []struct{ rel, name, value string }{
			{"x/attr.txt", "user.lifeboat.bin", "\x00\xffbinary\n"},
			{"x/attr.txt", "user.lifeboat.empty", ""},
			{"data/a", "user.lifeboat.linked", "on the shared inode"},
			{"x", "user.lifeboat.dir", "on a directory"},
		} {
			if err := setXattr(filepath.Join(dir, x.rel), x.name, []byte(x.value)); err != nil {
				t.Fatal(err)
			}
		}
		ft.Xattrs = true
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(filepath.Join(dir, "owned"), 4242, 4243); err != nil {
			t.Fatal(err)
		}
		ft.Owners = true
	}
	// Distinct mtimes with nanoseconds, directories last (deepest first)
	// so setting a child's does not move its parent's.
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSymlink == 0 {
			paths = append(paths, p)
		}
		return err
	})
	base := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for i, p := range slicesBackward(paths) {
		mt := base.Add(time.Duration(i)*time.Hour + time.Duration(i*1000+123))
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "ro"), 0o755) })
	return ft
}

func slicesBackward(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// entry is what CompareTrees checks of one path.
type entry struct {
	typ    fs.FileMode
	perm   fs.FileMode
	body   string
	target string
	mtime  int64 // whole seconds: SFTP carries no more
	uid    uint32
	gid    uint32
	ino    uint64
	xattrs string
}

func describe(t testing.TB, dir string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := fsmeta.Walk(dir, func(p, rel string, info fs.FileInfo) (err error) {
		st := info.Sys().(*syscall.Stat_t)
		e := entry{typ: info.Mode().Type(), perm: info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky),
			mtime: info.ModTime().Unix(), uid: st.Uid, gid: st.Gid, ino: st.Ino}
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.body = string(b)
		case info.Mode()&fs.ModeSymlink != 0:
			if e.target, err = os.Readlink(p); err != nil {
				return err
			}
			e.perm, e.mtime = 0, 0
		}
		if info.Mode().IsRegular() || info.IsDir() {
			xs, err := fsmeta.LXattrs(p, fsmeta.User)
			if err != nil {
				return err
			}
			e.xattrs = fmt.Sprintf("%q", xs)
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatalf("describing %s: %v", dir, err)
	}
	return out
}

// CompareTrees fails t unless got holds src as keep says a copy keeps it:
// the same paths, types, permission bits (setuid, setgid, sticky too),
// content, symlink targets and mtimes (to the second) always; the
// hard-link structure of regular files, user.* attributes, holes and
// owners where keep (and what the source really holds, ft) says so.
func CompareTrees(t testing.TB, src, got string, keep providers.FileSupport, ft FidelityTree) {
	t.Helper()
	want, have := describe(t, src), describe(t, got)
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	groups := map[uint64][]string{}
	for rel, w := range want {
		h, ok := have[rel]
		switch {
		case !ok:
			bad("%s missing", rel)
			continue
		case h.typ != w.typ:
			bad("%s: type %v, want %v", rel, h.typ, w.typ)
			continue
		case h.perm != w.perm:
			bad("%s: mode %v, want %v", rel, h.perm, w.perm)
		case h.body != w.body:
			bad("%s: content differs (%d bytes, want %d)", rel, len(h.body), len(w.body))
		case h.target != w.target:
			bad("%s: link target %q, want %q", rel, h.target, w.target)
		case h.mtime != w.mtime:
			bad("%s: mtime %s, want %s", rel, time.Unix(h.mtime, 0).UTC(), time.Unix(w.mtime, 0).UTC())
		}
		if keep.Xattrs && ft.Xattrs && h.xattrs != w.xattrs {
			bad("%s: xattrs %s, want %s (FileSupport claims Xattrs)", rel, h.xattrs, w.xattrs)
		}
		if keep.Ownership && ft.Owners && (h.uid != w.uid || h.gid != w.gid) {
			bad("%s: owner %d:%d, want %d:%d (FileSupport claims Ownership)", rel, h.uid, h.gid, w.uid, w.gid)
		}
		if w.typ.IsRegular() {
			groups[w.ino] = append(groups[w.ino], rel)
		}
	}
	for rel := range have {
		if _, ok := want[rel]; !ok {
			bad("%s: not in the source", rel)
		}
	}
	if keep.HardLinks {
		for _, g := range groups {
			for _, rel := range g[1:] {
				if have[rel].ino != have[g[0]].ino {
					bad("%s and %s are one file in the source but two in the copy (FileSupport claims HardLinks)", g[0], rel)
				}
			}
		}
	}
	if keep.Sparse && ft.Sparse {
		if h, err := firstHole(filepath.Join(got, "sparse.img")); err != nil || h >= 4<<20 {
			bad("sparse.img has no hole in the copy (first hole at %d, %v; FileSupport claims Sparse)", h, err)
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Fatalf("copy differs from the source (FileSupport %+v):\n  %s", keep, strings.Join(problems, "\n  "))
	}
}

func testFidelity(t *testing.T, h Harness) {
	p := h.New(t)
	if !p.Capabilities().Files {
		t.Skip("adapter has no file access")
	}
	ctx := context.Background()
	keep := Support(t, p)
	t.Logf("FileSupport: %+v", keep)
	id := create(t, p, uniqueKey(t))
	src := t.TempDir()
	ft := RichTree(t, src, keep.Fifos)
	if !ft.Xattrs {
		t.Log("the filesystem under the test's temporary directory takes no user xattrs: that part is not checked")
	}
	PutTree(t, p, id, src)
	f, err := p.ReadFiles(ctx, id)
	if err != nil {
		t.Fatalf("ReadFiles: %v", err)
	}
	defer f.Close()
	CompareTrees(t, src, f.Dir(), keep, ft)

	if !keep.Fifos {
		// Claimed unsupported: refused by name, before anything is written.
		fifoSrc := t.TempDir()
		MakeFifo(t, filepath.Join(fifoSrc, "pipe"), 0o600)
		calls := 0
		_, err := p.WriteFiles(providers.WithWriteStarted(ctx, func() { calls++ }), id, fifoSrc)
		WantKind(t, "WriteFiles of a fifo the adapter says it cannot create", err, providers.KindUnsupported)
		if !strings.Contains(err.Error(), "pipe") || calls != 0 {
			t.Fatalf("refusal of a fifo: %v (WriteStarted called %d times)", err, calls)
		}
	}
}

// writeWatch counts WriteStarted calls and, when the harness can Peek,
// records whether the instance's side had changed at the first.
type writeWatch struct {
	mu      sync.Mutex
	calls   int
	changed string
}

func (w *writeWatch) ctx(t *testing.T, h Harness, id providers.InstanceID) context.Context {
	before := ""
	if h.Peek != nil {
		before = h.Peek(t)
	}
	return providers.WithWriteStarted(context.Background(), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.calls++
		if w.calls == 1 && h.Peek != nil {
			if now := h.Peek(t); now != before {
				w.changed = fmt.Sprintf("before:\n%s\nat WriteStarted:\n%s", before, now)
			}
		}
	})
}

func (w *writeWatch) want(t *testing.T, what string, called bool) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if called != (w.calls > 0) {
		t.Fatalf("%s: WriteStarted called %d times, want called=%v", what, w.calls, called)
	}
	if w.changed != "" {
		t.Fatalf("%s: the provider had already changed something when it called WriteStarted:\n%s", what, w.changed)
	}
}

func testWriteStarted(t *testing.T, h Harness) {
	p := h.New(t)
	if !p.Capabilities().Files {
		t.Skip("adapter has no file access")
	}
	id := create(t, p, uniqueKey(t))
	src := t.TempDir()
	Tree(t, src, "w")

	var absent writeWatch
	if _, err := p.WriteFiles(absent.ctx(t, h, id), h.Absent, src); err == nil {
		t.Fatal("WriteFiles into an absent instance succeeded")
	}
	absent.want(t, "WriteFiles into an absent instance", false)

	sockSrc := t.TempDir()
	Tree(t, sockSrc, "s")
	if err := os.Mkdir(filepath.Join(sockSrc, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	MakeSocket(t, filepath.Join(sockSrc, "run", "agent.sock"))
	var sock writeWatch
	_, err := p.WriteFiles(sock.ctx(t, h, id), id, sockSrc)
	WantKind(t, "WriteFiles of a tree holding a socket", err, providers.KindUnsupported)
	if !strings.Contains(err.Error(), "run/agent.sock") || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("refusal of a socket does not name it or say nothing was written: %v", err)
	}
	sock.want(t, "WriteFiles of a tree holding a socket", false)
	t.Log(err)

	var write writeWatch
	staging, err := p.WriteFiles(write.ctx(t, h, id), id, src)
	if err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	write.want(t, "WriteFiles", true)

	var foreign writeWatch
	err = p.Switch(foreign.ctx(t, h, id), id, "/tmp/not-a-staging-dir")
	WantKind(t, "Switch of a foreign path", err, providers.KindInvalid)
	foreign.want(t, "Switch of a foreign path", false)

	var sw writeWatch
	if err := p.Switch(sw.ctx(t, h, id), id, staging); err != nil {
		t.Fatalf("Switch: %v", err)
	}
	sw.want(t, "Switch", true)
}

func testPermission(t *testing.T, h Harness) {
	p := h.New(t)
	if !p.Capabilities().Files {
		t.Skip("adapter has no file access")
	}
	ctx := context.Background()
	id := create(t, p, uniqueKey(t))
	t.Run("UnreadableSource", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads every file: an unreadable source needs a non-root run")
		}
		src := t.TempDir()
		Tree(t, src, "p")
		secret := filepath.Join(src, "secret", "key")
		if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(secret, []byte("k"), 0o000); err != nil {
			t.Fatal(err)
		}
		_, err := p.WriteFiles(ctx, id, src)
		WantKind(t, "WriteFiles of an unreadable file", err, providers.KindPermission)
		if !strings.Contains(err.Error(), "secret/key") {
			t.Fatalf("permission error does not name the file: %v", err)
		}
		if !errors.Is(err, providers.ErrPermission) {
			t.Fatalf("errors.Is(err, ErrPermission) is false: %v", err)
		}
		t.Log(err)
	})
	t.Run("UnwritableTarget", func(t *testing.T) {
		if h.DenyWrites == nil {
			t.Skip("the harness cannot make the instance refuse writes")
		}
		where := h.DenyWrites(t)
		if where == "" {
			t.Skip("cannot make the instance refuse writes here")
		}
		src := t.TempDir()
		Tree(t, src, "q")
		_, err := p.WriteFiles(ctx, id, src)
		WantKind(t, "WriteFiles into an unwritable instance", err, providers.KindPermission)
		if !strings.Contains(err.Error(), where) {
			t.Fatalf("permission error does not name %s: %v", where, err)
		}
		t.Log(err)
	})
}
