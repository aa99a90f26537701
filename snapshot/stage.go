package snapshot

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Names of the directories restore creates next to the target.
const (
	stagePrefix = ".lifeboat-restore-"
	stageOldPre = ".lifeboat-old-"
)

// stageHooks are the rename system calls, replaceable in tests to
// simulate filesystems without RENAME_EXCHANGE and failing renames.
type stageHooks struct {
	renameat2 func(olddirfd int, oldpath string, newdirfd int, newpath string, flags uint) error
	renameat  func(olddirfd int, oldpath string, newdirfd int, newpath string) error
}

var stageDefaultHooks = stageHooks{renameat2: unix.Renameat2, renameat: unix.Renameat}

// stage is a staging directory next to a restore target, and the switch
// that puts it in place.
//
// Restore never writes under the target's name. It builds the whole tree
// in a staging directory created next to the target (same parent, so the
// same filesystem), named ".lifeboat-restore-<16 hex>", fsyncs every file
// and directory in it, and only then switches:
//
//   - New target (it must not exist): renameat2(staging, target,
//     RENAME_NOREPLACE), then fsync of the parent. Where the filesystem
//     refuses RENAME_NOREPLACE (EINVAL/ENOSYS), a plain rename after
//     checking that the target is still absent.
//   - Existing target (only with Replace; it must be a directory, not a
//     symlink, and not a mount point): renameat2(staging, target,
//     RENAME_EXCHANGE) swaps the two names atomically; the old tree is then
//     under the staging name. The parent is fsynced; only when that holds
//     is the old tree removed. If the fsync fails the exchange is undone.
//
// Two-step fallback, used only when the filesystem refuses
// RENAME_EXCHANGE (EINVAL or ENOSYS; older kernels, some FUSE and network
// filesystems):
//
//  1. rename target -> <parent>/.lifeboat-old-<16 hex> (the old tree is
//     kept whole under that name);
//  2. rename staging -> target;
//  3. fsync the parent, then remove the old tree (if that fsync fails,
//     the old tree is kept and its path reported as a leftover).
//
// If step 2 fails, the old tree is renamed back to the target and the
// restore fails with the target as it was. Between steps 1 and 2 the
// target name is briefly absent (this is the one window the exchange
// avoids). After a crash inside that window the target is missing and
// both trees survive in the parent: the complete new tree as
// .lifeboat-restore-<hex> and the old one as .lifeboat-old-<hex>; rename
// either back to the target by hand (`mv .lifeboat-old-<hex> TARGET`
// restores the state before the restore). A crash at any other point
// leaves the target either wholly old or wholly new, plus at most one
// leftover .lifeboat-* directory that is safe to delete.
type stage struct {
	target     string // absolute target path, for messages
	parent     string // the target's parent directory
	parentFD   int
	targetName string
	name       string // the staging directory's name in parent
	fd         int    // the staging directory
	replace    bool   // the target exists and is to be exchanged
	keep       bool   // a failed switch left a tree the user needs at the staging name
	hooks      stageHooks
}

// newStage checks the target and creates the staging directory. It
// refuses an existing target unless replace is set, and then only a real
// directory on the parent's filesystem.
func newStage(target string, replace bool, hooks *stageHooks) (*stage, error) {
	if target == "" {
		return nil, errors.New("no restore target given")
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, fmt.Errorf("restore target %q: %w", target, err)
	}
	s := &stage{target: abs, parent: filepath.Dir(abs), targetName: filepath.Base(abs), parentFD: -1, fd: -1, hooks: stageDefaultHooks}
	if hooks != nil {
		s.hooks = *hooks
	}
	if abs == s.parent {
		return nil, fmt.Errorf("restore target %s is the filesystem root; give a directory below it", abs)
	}
	s.parentFD, err = unix.Open(s.parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("restore target %s: opening its parent directory: %w (create the parent first)", abs, &fs.PathError{Op: "open", Path: s.parent, Err: err})
	}
	if err := s.checkTarget(replace); err != nil {
		_ = unix.Close(s.parentFD)
		return nil, err
	}
	for range 10 {
		s.name = stagePrefix + stageRandom()
		err = unix.Mkdirat(s.parentFD, s.name, 0o700)
		if err != unix.EEXIST {
			break
		}
	}
	if err != nil {
		_ = unix.Close(s.parentFD)
		return nil, fmt.Errorf("creating a staging directory in %s for restore target %s: %w", s.parent, abs, err)
	}
	if s.fd, err = safeOpenAt(s.parentFD, s.name, unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
		return nil, errors.Join(fmt.Errorf("opening staging directory %s: %w", s.path(), err), s.abort())
	}
	return s, nil
}

func (s *stage) checkTarget(replace bool) error {
	var st, pst unix.Stat_t
	err := unix.Fstatat(s.parentFD, s.targetName, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == unix.ENOENT:
		return nil
	case err != nil:
		return fmt.Errorf("restore target %s: %w", s.target, err)
	case !replace:
		return fmt.Errorf("%w: %s (restore into a new directory, or replace it)", ErrTargetExists, s.target)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("restore target %s exists and is not a directory (a symlink or file); only a directory can be replaced", s.target)
	}
	if err := unix.Fstat(s.parentFD, &pst); err != nil {
		return fmt.Errorf("restore target %s: %w", s.target, err)
	}
	if st.Dev != pst.Dev {
		return fmt.Errorf("restore target %s is a mount point, which cannot be swapped atomically; restore into a directory inside it", s.target)
	}
	s.replace = true
	return nil
}

func stageRandom() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail on Linux
	return hex.EncodeToString(b[:])
}

// path is the staging directory's path.
func (s *stage) path() string { return filepath.Join(s.parent, s.name) }

// commit puts the staged tree in place (see the comment at the top of this
// file). On success the staging name is gone unless the replaced tree
// could not be removed: leftover then names where it still is. On error
// the target is as it was and the staged tree is still at s.path().
func (s *stage) commit() (leftover string, err error) {
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
	if !s.replace {
		return "", s.commitNew()
	}
	err = s.hooks.renameat2(s.parentFD, s.name, s.parentFD, s.targetName, unix.RENAME_EXCHANGE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		return s.commitTwoStep()
	}
	if err != nil {
		return "", fmt.Errorf("exchanging %s with the staged tree: %w", s.target, err)
	}
	if err := unix.Fsync(s.parentFD); err != nil {
		if uerr := s.hooks.renameat2(s.parentFD, s.name, s.parentFD, s.targetName, unix.RENAME_EXCHANGE); uerr != nil {
			s.keep = true
			return "", fmt.Errorf("syncing %s after exchanging %s: %w; undoing the exchange failed too (%v): the new tree is at %s and the old one at %s",
				s.parent, s.target, err, uerr, s.target, s.path())
		}
		return "", fmt.Errorf("syncing %s after exchanging %s: %w (exchange undone)", s.parent, s.target, err)
	}
	// The old tree is now under the staging name.
	if err := stageRemoveAll(s.path()); err != nil {
		return s.path(), nil
	}
	return "", nil
}

func (s *stage) commitNew() error {
	err := s.hooks.renameat2(s.parentFD, s.name, s.parentFD, s.targetName, unix.RENAME_NOREPLACE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		var st unix.Stat_t
		if serr := unix.Fstatat(s.parentFD, s.targetName, &st, unix.AT_SYMLINK_NOFOLLOW); serr != unix.ENOENT {
			return fmt.Errorf("%w: %s appeared during the restore", ErrTargetExists, s.target)
		}
		err = s.hooks.renameat(s.parentFD, s.name, s.parentFD, s.targetName)
	}
	switch {
	case err == unix.EEXIST || err == unix.ENOTEMPTY:
		return fmt.Errorf("%w: %s appeared during the restore", ErrTargetExists, s.target)
	case err != nil:
		return fmt.Errorf("renaming the staged tree to %s: %w", s.target, err)
	}
	if err := unix.Fsync(s.parentFD); err != nil {
		// The rename is visible but not known durable: the restore fails
		// and the new tree is moved back out of the target's name.
		if uerr := s.hooks.renameat(s.parentFD, s.targetName, s.parentFD, s.name); uerr != nil {
			return fmt.Errorf("syncing %s after renaming the staged tree to %s: %w; moving it back failed too: %v", s.parent, s.target, err, uerr)
		}
		return fmt.Errorf("syncing %s after renaming the staged tree to %s: %w (rename undone)", s.parent, s.target, err)
	}
	return nil
}

// commitTwoStep is the documented fallback for filesystems without
// RENAME_EXCHANGE.
func (s *stage) commitTwoStep() (string, error) {
	old := stageOldPre + stageRandom()
	if err := s.hooks.renameat(s.parentFD, s.targetName, s.parentFD, old); err != nil {
		return "", fmt.Errorf("moving %s aside (no atomic exchange on this filesystem): %w", s.target, err)
	}
	if err := s.hooks.renameat(s.parentFD, s.name, s.parentFD, s.targetName); err != nil {
		if uerr := s.hooks.renameat(s.parentFD, old, s.parentFD, s.targetName); uerr != nil {
			s.keep = true
			return "", fmt.Errorf("renaming the staged tree to %s: %w; moving the old tree back failed too (%v): it is at %s",
				s.target, err, uerr, filepath.Join(s.parent, old))
		}
		return "", fmt.Errorf("renaming the staged tree to %s: %w (old tree moved back)", s.target, err)
	}
	if err := unix.Fsync(s.parentFD); err != nil {
		// Both renames are visible; keep the old tree for the user.
		return filepath.Join(s.parent, old), nil
	}
	if err := stageRemoveAll(filepath.Join(s.parent, old)); err != nil {
		return filepath.Join(s.parent, old), nil
	}
	return "", nil
}

// abort removes the staging directory and whatever it holds, unless a
// failed switch left a tree there that the error message points the user
// to.
func (s *stage) abort() error {
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
	if s.keep {
		s.close()
		return nil
	}
	err := stageRemoveAll(s.path())
	s.close()
	if err != nil {
		return fmt.Errorf("removing staging directory %s: %w (delete it by hand)", s.path(), err)
	}
	return nil
}

// close releases the parent directory.
func (s *stage) close() {
	if s.parentFD >= 0 {
		_ = unix.Close(s.parentFD)
		s.parentFD = -1
	}
}

// stageRemoveAll removes a tree restore created. os.RemoveAll never
// follows symlinks; when it fails on a directory without write or search
// permission (possible when not root), directories are made accessible
// and it is tried again.
func stageRemoveAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
