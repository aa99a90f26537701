package dirwatch

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/nstest"
)

// walk is a walk as a caller makes it: Mark, every directory watched
// before it is listed, every file with more than one link watched, Done.
func walk(t *testing.T, tr *Tree, root string) error {
	t.Helper()
	tr.Mark()
	var dir func(path string)
	dir = func(path string) {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		_ = tr.WatchDir(fd, &st)
		f := os.NewFile(uintptr(fd), path)
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			p := filepath.Join(path, e.Name())
			if e.IsDir() {
				dir(p)
				continue
			}
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
				_ = tr.WatchFile(p)
			}
		}
	}
	dir(root)
	return tr.Done()
}

func newWatcher(t *testing.T) *Watcher {
	t.Helper()
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// tree writes a small workspace: two levels of directories, a file with
// a second link outside the tree, and returns its root and that outside
// link.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "ws")
	for _, d := range []string{"src/pkg", "empty"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a.txt", "src/b.go", "src/pkg/c.go", "linked.bin"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("content of "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside = filepath.Join(base, "outside.bin")
	if err := os.Link(filepath.Join(root, "linked.bin"), outside); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEveryKindOfChangeIsSeen: each way a workspace's files change, made
// after a walk, makes the tree read as changed; reading the files does
// not.
func TestEveryKindOfChangeIsSeen(t *testing.T) {
	changes := map[string]func(t *testing.T, root, outside string){
		"write into a nested file": func(t *testing.T, root, _ string) {
			f, err := os.OpenFile(filepath.Join(root, "src/pkg/c.go"), os.O_WRONLY, 0)
			must(t, err)
			_, err = f.WriteAt([]byte("X"), 3)
			must(t, err)
			// The descriptor stays open: the write itself is the event.
			t.Cleanup(func() { f.Close() })
		},
		"append":         func(t *testing.T, root, _ string) { appendTo(t, filepath.Join(root, "a.txt")) },
		"truncate":       func(t *testing.T, root, _ string) { must(t, os.Truncate(filepath.Join(root, "src/b.go"), 1)) },
		"chmod a file":   func(t *testing.T, root, _ string) { must(t, os.Chmod(filepath.Join(root, "a.txt"), 0o600)) },
		"chmod the root": func(t *testing.T, root, _ string) { must(t, os.Chmod(root, 0o700)) },
		"touch": func(t *testing.T, root, _ string) {
			must(t, unix.UtimesNano(filepath.Join(root, "src/pkg/c.go"), []unix.Timespec{{Sec: 1}, {Sec: 1}}))
		},
		"set an xattr": func(t *testing.T, root, _ string) {
			if err := unix.Setxattr(filepath.Join(root, "a.txt"), "user.lifeboat", []byte("v"), 0); err != nil {
				t.Skipf("no user xattrs here: %v", err)
			}
		},
		"create a file in an empty dir": func(t *testing.T, root, _ string) {
			must(t, os.WriteFile(filepath.Join(root, "empty/new"), nil, 0o644))
		},
		"create a dir": func(t *testing.T, root, _ string) { must(t, os.Mkdir(filepath.Join(root, "src/new"), 0o755)) },
		"rename within": func(t *testing.T, root, _ string) {
			must(t, os.Rename(filepath.Join(root, "src/b.go"), filepath.Join(root, "src/pkg/b.go")))
		},
		"move a dir out": func(t *testing.T, root, outside string) {
			must(t, os.Rename(filepath.Join(root, "src/pkg"), filepath.Join(filepath.Dir(outside), "pkg")))
		},
		"delete a file": func(t *testing.T, root, _ string) { must(t, os.Remove(filepath.Join(root, "src/pkg/c.go"))) },
		"delete a dir":  func(t *testing.T, root, _ string) { must(t, os.Remove(filepath.Join(root, "empty"))) },
		"a new link": func(t *testing.T, root, _ string) {
			must(t, os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "a2")))
		},
		"a symlink":                      func(t *testing.T, root, _ string) { must(t, os.Symlink("a.txt", filepath.Join(root, "src/l"))) },
		"write through the outside link": func(t *testing.T, _, outside string) { appendTo(t, outside) },
		"write through a shared mapping, then close": func(t *testing.T, root, _ string) {
			f, err := os.OpenFile(filepath.Join(root, "src/b.go"), os.O_RDWR, 0)
			must(t, err)
			m, err := unix.Mmap(int(f.Fd()), 0, 4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			must(t, err)
			m[0] = 'Z'
			must(t, unix.Munmap(m))
			must(t, f.Close())
		},
	}
	w := newWatcher(t)
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			root, outside := tree(t)
			tr := w.Tree()
			defer tr.Close()
			if !tr.Changed() {
				t.Fatal("a tree never walked reads as unchanged")
			}
			must(t, walk(t, tr, root))
			readAll(t, root)
			if tr.Changed() {
				t.Fatal("reading the files made the tree read as changed")
			}
			change(t, root, outside)
			if !tr.Changed() {
				t.Fatal("the change was not seen")
			}
			must(t, walk(t, tr, root))
			if tr.Changed() {
				t.Fatal("changed right after a new walk")
			}
		})
	}
}

func appendTo(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write([]byte("more"))
	must(t, err)
	must(t, f.Close())
}

// readAll opens, reads and stats every entry, as a capture does.
func readAll(t *testing.T, root string) {
	t.Helper()
	must(t, filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if _, err := d.Info(); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			_, err = os.ReadFile(path)
		}
		return err
	}))
}

// TestWatchesFollowTheTree: a directory moved out of the tree loses its
// watch at the next walk, and changes in it no longer count; a directory
// two trees hold stays watched until both let it go.
func TestWatchesFollowTheTree(t *testing.T) {
	w := newWatcher(t)
	root, outside := tree(t)
	tr := w.Tree()
	must(t, walk(t, tr, root))
	before := w.Watches() // 4 directories and the linked file
	if before != 5 {
		t.Fatalf("%d watches, want 5", before)
	}
	moved := filepath.Join(filepath.Dir(outside), "pkg")
	must(t, os.Rename(filepath.Join(root, "src/pkg"), moved))
	must(t, walk(t, tr, root))
	if got := w.Watches(); got != before-1 {
		t.Fatalf("%d watches after a directory left the tree, want %d", got, before-1)
	}
	must(t, os.WriteFile(filepath.Join(moved, "c.go"), []byte("changed outside"), 0o644))
	if tr.Changed() {
		t.Fatal("a change outside the tree counted")
	}

	sub := w.Tree()
	must(t, walk(t, sub, filepath.Join(root, "src")))
	if got := w.Watches(); got != before-1 {
		t.Fatalf("%d watches with a second tree over shared directories, want %d", got, before-1)
	}
	tr.Close()
	must(t, os.WriteFile(filepath.Join(root, "src/b.go"), []byte("changed"), 0o644))
	if !sub.Changed() {
		t.Fatal("the second tree lost its watch when the first closed")
	}
	sub.Close()
	if got := w.Watches(); got != 0 {
		t.Fatalf("%d watches after every tree closed", got)
	}
}

// TestWhatCannotBeVouchedForReadsChanged: a tree mid-walk, a walk that
// could not watch (a missing file, the watcher's share of the watch limit
// used), an invalidated walk, an overflowed queue and a closed watcher all
// read as changed.
func TestWhatCannotBeVouchedForReadsChanged(t *testing.T) {
	w := newWatcher(t)
	root, _ := tree(t)
	tr, other := w.Tree(), w.Tree()
	must(t, walk(t, tr, root))
	must(t, walk(t, other, root))

	tr.Mark()
	if !tr.Changed() {
		t.Fatal("a tree mid-walk reads as unchanged")
	}
	if err := tr.WatchFile(filepath.Join(root, "no such file")); err == nil {
		t.Fatal("watching a missing file succeeded")
	}
	if err := tr.Done(); err == nil || !tr.Changed() {
		t.Fatalf("a walk that could not watch: Done %v, changed %v", err, tr.Changed())
	}
	must(t, walk(t, tr, root))
	if tr.Changed() || other.Changed() {
		t.Fatal("changed after clean walks")
	}
	tr.Invalidate()
	if !tr.Changed() || other.Changed() {
		t.Fatal("Invalidate did not make the tree, and only it, read as changed")
	}
	must(t, walk(t, tr, root))
	if tr.Changed() {
		t.Fatal("changed after a clean walk that followed Invalidate")
	}

	// This Watcher's share of the per-user limit used up: the walk fails
	// and lets go of what it placed.
	limited := newWatcher(t)
	if limited.limit <= 0 {
		t.Fatal("no share of the per-user watch limit was set")
	}
	limited.limit = 3
	capped := limited.Tree()
	if err := walk(t, capped, root); err == nil || !strings.Contains(err.Error(), "share of the per-user limit") || !capped.Changed() {
		t.Fatalf("a walk past the watcher's share: %v, changed %v", err, capped.Changed())
	}
	if n := limited.Watches(); n != 0 {
		t.Fatalf("%d watches kept after a walk past the share", n)
	}

	// A queue overflow: every tree's events may be lost.
	ev := make([]byte, unix.SizeofInotifyEvent)
	binary.NativeEndian.PutUint32(ev[0:], ^uint32(0)) // wd -1
	binary.NativeEndian.PutUint32(ev[4:], unix.IN_Q_OVERFLOW)
	w.mu.Lock()
	w.apply(ev)
	w.mu.Unlock()
	if !tr.Changed() || !other.Changed() {
		t.Fatal("an overflow left a tree unchanged")
	}

	must(t, walk(t, tr, root))
	must(t, w.Close())
	if !tr.Changed() {
		t.Fatal("a tree of a closed watcher reads as unchanged")
	}
	if err := walk(t, tr, root); err == nil {
		t.Fatal("a walk with a closed watcher reported no error")
	}
}

// TestOtherFileSystemsAreNotVouchedFor: a file system mounted inside a
// tree, and a tree on a file system outside the allow-list (devpts here),
// fail the walk with ErrNotLocal and read as changed.
func TestOtherFileSystemsAreNotVouchedFor(t *testing.T) {
	if !nstest.InOwnMountNamespace(t) {
		return
	}
	w := newWatcher(t)
	root, _ := tree(t)
	tr := w.Tree()
	must(t, walk(t, tr, root))
	must(t, unix.Mount("tmpfs", filepath.Join(root, "src/pkg"), "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(root, "src/pkg"), unix.MNT_DETACH) })
	if err := walk(t, tr, root); !errors.Is(err, ErrNotLocal) || !tr.Changed() {
		t.Fatalf("a walk over a mount inside the tree: %v, changed %v; want ErrNotLocal and changed", err, tr.Changed())
	}
	if n := w.Watches(); n != 0 {
		t.Fatalf("%d watches kept after a failed walk", n)
	}

	pts := filepath.Join(t.TempDir(), "pts")
	must(t, os.Mkdir(pts, 0o755))
	must(t, unix.Mount("devpts", pts, "devpts", 0, "newinstance"))
	t.Cleanup(func() { _ = unix.Unmount(pts, unix.MNT_DETACH) })
	other := w.Tree()
	if err := walk(t, other, pts); !errors.Is(err, ErrNotLocal) || !other.Changed() {
		t.Fatalf("a walk over devpts: %v, changed %v; want ErrNotLocal and changed", err, other.Changed())
	}
}
