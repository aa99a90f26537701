package restore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"lifeboat/internal/nstest"
)

func TestStageNewTargetWithoutNoreplace(t *testing.T) {
	t.Parallel()
	// A filesystem that refuses RENAME_NOREPLACE: a plain rename after
	// checking the target is still absent.
	parent := t.TempDir()
	target := filepath.Join(parent, "t")
	calls := 0
	hooks := &stageHooks{
		renameat2: func(int, string, int, string, uint) error { return unix.EINVAL },
		renameat: func(ofd int, op string, nfd int, np string) error {
			calls++
			return unix.Renameat(ofd, op, nfd, np)
		},
	}
	s, err := newStage(target, false, hooks)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.path(), "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if left, err := s.commit(); err != nil || left != nil {
		t.Fatal(left, err)
	}
	s.close()
	if b, err := os.ReadFile(filepath.Join(target, "f")); err != nil || string(b) != "x" || calls != 1 {
		t.Errorf("target/f: %q %v (renames %d)", b, err, calls)
	}

	// The target appears while the restore runs: refused, not replaced.
	target2 := filepath.Join(parent, "t2")
	s, err = newStage(target2, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(target2, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.commit(); !errors.Is(err, ErrTargetExists) {
		t.Errorf("target appeared during the restore: %v", err)
	}
	if err := s.abort(); err != nil {
		t.Fatal(err)
	}
	rsNoLeftovers(t, parent)
}

func TestStageRefusesTargets(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target  string
		replace bool
		want    string
	}{
		{"", false, "no restore target"},
		{"/", true, "filesystem root"},
		{file, false, "already exists"},
		{file, true, "not a directory"},
		{filepath.Join(parent, "missing", "t"), false, "create the parent first"},
	} {
		_, err := newStage(tc.target, tc.replace, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("target %q: %v, want %q", tc.target, err, tc.want)
		}
	}
	mnt := nstest.Tmpfs(t, "size=1m")
	if _, err := newStage(mnt, true, nil); err == nil || !strings.Contains(err.Error(), "mount point") {
		t.Errorf("mount point target: %v", err)
	}
	rsNoLeftovers(t, parent)
}

// TestStageOldTreeKeptWhenUndeletable: after a successful exchange, an old
// tree that cannot be removed (an immutable file) is reported, not an error.
func TestStageOldTreeKeptWhenUndeletable(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	target := filepath.Join(parent, "t")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	rsWriteImmutable(t, filepath.Join(target, "stuck"), []byte("old"))
	s, err := newStage(target, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the old tree moved: let t.TempDir remove it whatever happened
		_ = rsSetImmutable(filepath.Join(s.path(), "stuck"), false)
	})
	left, err := s.commit()
	s.close()
	if err != nil || left == nil || left.Path != s.path() {
		t.Fatalf("commit: leftover %v, %v", left, err)
	}
	if len(left.Kept) != 1 || left.Kept[0].Path != filepath.Join(s.path(), "stuck") || !strings.Contains(left.Kept[0].Why, "immutable") {
		t.Errorf("what stayed: %+v", left.Kept)
	}
	if _, err := os.Stat(filepath.Join(target, "stuck")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old tree is still the target: %v", err)
	}
}

// rsWriteImmutable writes the file p and sets its immutable flag until the
// test ends; it skips the test where that cannot be done.
func rsWriteImmutable(t *testing.T, p string, data []byte) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("setting the immutable flag needs root")
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rsSetImmutable(p, true); err != nil {
		t.Skipf("cannot set the immutable flag here: %v", err)
	}
	t.Cleanup(func() { _ = rsSetImmutable(p, false) })
}

// rsImmutableFL is FS_IMMUTABLE_FL from linux/fs.h.
const rsImmutableFL = 0x10

func rsSetImmutable(p string, on bool) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var flags int64 // the ioctls take a long on amd64; the kernel reads an int
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.FS_IOC_GETFLAGS, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return e
	}
	if on {
		flags |= rsImmutableFL
	} else {
		flags &^= rsImmutableFL
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.FS_IOC_SETFLAGS, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return syscall.Errno(e)
	}
	return nil
}

// TestRemoveTreeNamesAtMost20: a tree with 25 entries that cannot be
// removed (immutable files) names 20 of them, each with the reason and
// what to do, and counts the other 5; the rest of the tree is removed.
func TestRemoveTreeNamesAtMost20(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	tree := filepath.Join(parent, "tree")
	var stuck []string
	for i := range 25 {
		p := filepath.Join(tree, "d", strings.Repeat("s", i+1))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		rsWriteImmutable(t, p, nil)
		stuck = append(stuck, p)
	}
	if err := os.WriteFile(filepath.Join(tree, "gone"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	left := removeTree(fd, parent, "tree", nil)
	if left == nil || left.Path != tree || len(left.Kept) != 20 || left.More != 5 {
		t.Fatalf("what stayed: %+v", left)
	}
	for _, k := range left.Kept {
		if !strings.HasPrefix(k.Path, filepath.Join(tree, "d")+"/") || !strings.Contains(k.Why, "chattr -i -a, then remove "+tree) {
			t.Errorf("%+v", k)
		}
	}
	if !strings.Contains(left.String(), "and 5 more entries") {
		t.Errorf("message: %s", left)
	}
	if _, err := os.Lstat(filepath.Join(tree, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the removable file stayed: %v", err)
	}
	for _, p := range stuck {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
