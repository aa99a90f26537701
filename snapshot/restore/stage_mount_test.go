package restore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/nstest"
	"lifeboat/snapshot/internal/snaptest"
)

// restore --replace of a directory holding a bind mount must not remove
// the replaced tree through the mount: the mounted files (the mount's
// source) stay, and the restore says which mount point stayed rather than
// only "the replaced tree could not be removed".

// rsBind bind-mounts src at dst (root, in the test's own mount namespace)
// and unmounts it, wherever a switch moved it, before the test's
// directories are removed.
func rsBind(t *testing.T, src, dst string, moved ...*string) {
	t.Helper()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount %s at %s: %v", src, dst, err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(dst, unix.MNT_DETACH)
		for _, m := range moved {
			if *m != "" {
				_ = unix.Unmount(*m, unix.MNT_DETACH)
			}
		}
	})
}

// TestReplaceNeverEntersMounts: the tree a restore --replace swaps out
// holds a bind mount of a directory of the same filesystem (the attack:
// same device, so a device check alone does not see it), a tmpfs mounted
// deeper down, a bind-mounted file, and a symlink to the outside. The
// restore succeeds; nothing outside the replaced tree changes; everything
// of the replaced tree that is not a mount is removed; each mount point
// stays where the switch moved it and is named with what to do. Once the
// user unmounts them, the next clean-up removes the rest. It runs for the
// atomic exchange, for the two-step fallback, and for a kernel without
// openat2 (the statx mount-root check instead).
func TestReplaceNeverEntersMounts(t *testing.T) {
	t.Parallel()
	if !nstest.InOwnMountNamespace(t) {
		return
	}
	r, m, want := rsMixedRepo(t, 6, 3000)
	noOpenat2 := func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	for _, tc := range []struct {
		name  string
		hooks *stageHooks
	}{
		{"exchange", nil},
		{"two-step", &stageHooks{renameat2: rsNoExchange, renameat: unix.Renameat}},
		{"no-openat2", &stageHooks{renameat2: unix.Renameat2, renameat: unix.Renameat, openat2: noOpenat2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outside := t.TempDir() // the bind mount's source, on the same filesystem
			for p, c := range map[string]string{"precious": "keep me", "sub/deeper": "and me"} {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(outside, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(outside, p), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			lone := filepath.Join(t.TempDir(), "lone-file") // a bind-mounted file's source
			if err := os.WriteFile(lone, []byte("single"), 0o644); err != nil {
				t.Fatal(err)
			}
			outsideBefore, loneBefore := snaptest.Dump(t, outside, true), snaptest.Dump(t, lone, true)

			parent := t.TempDir()
			target, _ := rsOldTarget(t, parent)
			for _, d := range []string{"bind", "deep/er/tmpfs"} {
				if err := os.MkdirAll(filepath.Join(target, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, err := range []error{
				os.WriteFile(filepath.Join(target, "file-bind"), nil, 0o644),
				os.WriteFile(filepath.Join(target, "deep", "plain"), []byte("old"), 0o644),
				os.Symlink(outside, filepath.Join(target, "link")),
				os.Symlink(outside, filepath.Join(target, "deep", "link")),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			var movedBind, movedTmpfs, movedFile string
			rsBind(t, outside, filepath.Join(target, "bind"), &movedBind)
			rsBind(t, lone, filepath.Join(target, "file-bind"), &movedFile)
			tmpfs := filepath.Join(target, "deep/er/tmpfs")
			if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=1m"); err != nil {
				t.Skipf("mount -t tmpfs refused: %v", err)
			}
			t.Cleanup(func() { _ = unix.Unmount(tmpfs, unix.MNT_DETACH); _ = unix.Unmount(movedTmpfs, unix.MNT_DETACH) })
			if err := os.WriteFile(filepath.Join(tmpfs, "on-tmpfs"), []byte("tmpfs data"), 0o644); err != nil {
				t.Fatal(err)
			}

			prog := &rsProgress{}
			res, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true, Progress: prog, hooks: tc.hooks})
			if err != nil {
				t.Fatal(err)
			}
			rsCheckFiles(t, target, want)
			left := res.Leftover
			wantLeft := res.Staging
			if tc.name == "two-step" {
				wantLeft = filepath.Join(parent, stageOldPre+strings.TrimPrefix(filepath.Base(res.Staging), stagePrefix))
			}
			if left != wantLeft {
				t.Fatalf("leftover %q, want the replaced tree at %q", left, wantLeft)
			}
			movedBind, movedFile, movedTmpfs = filepath.Join(left, "bind"), filepath.Join(left, "file-bind"), filepath.Join(left, "deep/er/tmpfs")

			// Nothing outside the replaced tree changed.
			if got := snaptest.Dump(t, outside, true); got != outsideBefore {
				t.Errorf("the bind mount's source changed:\nbefore:\n%s\nafter:\n%s", outsideBefore, got)
			}
			if got := snaptest.Dump(t, lone, true); got != loneBefore {
				t.Errorf("the bind-mounted file's source changed: %s", got)
			}
			if b, err := os.ReadFile(filepath.Join(movedTmpfs, "on-tmpfs")); err != nil || string(b) != "tmpfs data" {
				t.Errorf("the tmpfs lost its file: %q %v", b, err)
			}
			// Exactly the mount points stayed, each named with what to do.
			var kept []string
			for _, k := range res.LeftoverKept {
				kept = append(kept, k.Path)
				if !strings.Contains(k.Why, "mount point") || !strings.Contains(k.Why, "unmount it, then remove "+left) {
					t.Errorf("%s: why %q", k.Path, k.Why)
				}
				if !strings.Contains(prog.errs[k.Path], k.Why) {
					t.Errorf("%s: not reported to Progress: %q", k.Path, prog.errs[k.Path])
				}
			}
			slices.Sort(kept)
			if w := []string{movedBind, movedTmpfs, movedFile}; !slices.Equal(kept, w) {
				t.Errorf("kept %q, want %q", kept, w)
			}
			var rest []string
			_ = filepath.WalkDir(left, func(p string, d os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rest = append(rest, strings.TrimPrefix(p, left))
				if p == movedBind || p == movedTmpfs {
					return filepath.SkipDir // the mounts' own content: checked above
				}
				return nil
			})
			if w := []string{"", "/bind", "/deep", "/deep/er", "/deep/er/tmpfs", "/file-bind"}; !slices.Equal(rest, w) {
				t.Errorf("what stayed of the replaced tree: %q, want only the mount points and their parents %q", rest, w)
			}

			// The user unmounts; the next clean-up of the parent removes the rest.
			for _, p := range []string{movedBind, movedFile, movedTmpfs} {
				if err := unix.Unmount(p, 0); err != nil {
					t.Fatalf("unmount %s: %v", p, err)
				}
			}
			rsCleanRemoves(t, parent, left, "after unmounting")
			if got := snaptest.Dump(t, outside, true); got != outsideBefore {
				t.Errorf("the bind mount's source changed after the clean-up:\n%s", got)
			}
		})
	}
}

// TestReplaceRefusesBindMountTarget: a target that is itself a bind mount
// of a directory of the same filesystem (same device as its parent) is a
// mount point: refused before anything is written, the mounted files
// untouched.
func TestReplaceRefusesBindMountTarget(t *testing.T) {
	t.Parallel()
	if !nstest.InOwnMountNamespace(t) {
		return
	}
	r, m, _ := rsMixedRepo(t, 3, 1000)
	src, _ := rsOldTarget(t, t.TempDir())
	before := snaptest.Dump(t, src, true)
	parent := t.TempDir()
	target := filepath.Join(parent, "mnt")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	rsBind(t, src, target)
	for _, hooks := range []*stageHooks{nil, {renameat2: unix.Renameat2, renameat: unix.Renameat,
		openat2: func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }}} {
		_, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true, hooks: hooks})
		if err == nil || !strings.Contains(err.Error(), "is a mount point") || !strings.Contains(err.Error(), target) {
			t.Errorf("restore --replace of a bind mount: %v", err)
		}
		if got := snaptest.Dump(t, src, true); got != before {
			t.Errorf("the mounted tree changed:\n%s", got)
		}
		rsNoLeftovers(t, parent)
	}
}

// TestRemoveTreeNeverFollowsSymlinks: removing a tree removes its
// symlinks, never what they point to, whichever way they point (a
// directory, a file, ".."), and a directory swapped for a symlink is
// unlinked, not entered.
func TestRemoveTreeNeverFollowsSymlinks(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snaptest.Dump(t, outside, true)
	parent := t.TempDir()
	tree := filepath.Join(parent, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, to := range map[string]string{"d/dir": outside, "d/file": filepath.Join(outside, "f"), "up": "..", "d/upup": "../.."} {
		if err := os.Symlink(to, filepath.Join(tree, name)); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if left := removeTree(fd, parent, "tree", nil); left != nil {
		t.Fatalf("what stayed: %s", left)
	}
	if _, err := os.Lstat(tree); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tree still there: %v", err)
	}
	if got := snaptest.Dump(t, outside, true); got != before {
		t.Errorf("outside changed:\n%s", got)
	}
}
