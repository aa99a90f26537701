package restore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// Names of the directories restore creates next to the target, each
// followed by the same 16 hex digits for one restore.
const (
	stagePrefix = ".lifeboat-restore-" // the staging tree; after an exchange, the replaced tree
	stageOldPre = ".lifeboat-old-"     // the replaced tree, in the two-step fallback
	stageKept   = ".lifeboat-kept-"    // a replaced tree a failed switch could not put back: never removed by a clean-up
)

// stageHooks are system calls replaceable in tests: renames (filesystems
// without RENAME_EXCHANGE, failing renames), the parent's fsync after the
// switch, and openat2 (kernels without it). A nil fsync or openat2 is the
// real one.
type stageHooks struct {
	renameat2 func(olddirfd int, oldpath string, newdirfd int, newpath string, flags uint) error
	renameat  func(olddirfd int, oldpath string, newdirfd int, newpath string) error
	fsync     func(fd int) error
	openat2   func(dirfd int, path string, how *unix.OpenHow) (int, error)
}

var stageDefaultHooks = stageHooks{renameat2: unix.Renameat2, renameat: unix.Renameat, fsync: unix.Fsync, openat2: unix.Openat2}

// stage is a staging directory next to a restore target, and the switch
// that puts it in place.
//
// A restore never writes under the target's name. It builds the whole tree
// in a staging directory created next to the target (same parent, so the
// same filesystem), named ".lifeboat-restore-<16 hex>", fsyncs every file
// and directory in it, and only then switches:
//
//   - New target (it must not exist): renameat2(staging, target,
//     RENAME_NOREPLACE), then fsync of the parent. Where the filesystem
//     refuses RENAME_NOREPLACE (EINVAL/ENOSYS), a plain rename after
//     checking that the target is still absent.
//   - Existing target (only with Replace; it must be a directory, not a
//     symlink, and not a mount point, a bind mount included):
//     renameat2(staging, target, RENAME_EXCHANGE) swaps the two names
//     atomically; the old tree is then under the staging name. The parent
//     is fsynced; only when that holds is the old tree removed. If the
//     fsync fails the exchange is undone; if undoing fails too, the old
//     tree is renamed to .lifeboat-kept-<hex>, which no clean-up removes.
//
// Two-step fallback, used only when the filesystem refuses
// RENAME_EXCHANGE (EINVAL or ENOSYS; older kernels, some FUSE and network
// filesystems):
//
//  1. rename target -> <parent>/.lifeboat-old-<16 hex>, the staging
//     directory's hex digits (the old tree is kept whole under that name);
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
// leftover .lifeboat-* directory, which the next clean-up removes.
//
// Removing a tree (the replaced one, or the staging tree of a failed
// restore) never leaves it: it never follows a symlink and never enters
// a mount point; what cannot be removed stays and is named
// (stage_remove.go).
//
// The restore holds an exclusive flock on its staging directory from
// its creation to its end; the kernel drops it when the process dies,
// however it dies. Before creating its own, a restore removes from the
// parent the staging and replaced trees of restores whose process is gone
// (their lock is free), never a locked one, and never the pair a crash
// inside the fallback's window left (stage_clean.go). With a records
// directory, the restore also notes its parent there while it runs, so
// that `lifeboat unlock` finds what a killed restore left.
type stage struct {
	target     string // absolute target path, for messages
	parent     string // the target's parent directory
	parentFD   int
	targetName string
	hex        string // the 16 hex digits of this restore's .lifeboat-* names
	name       string // the staging directory's name in parent
	fd         int    // the staging directory
	lockFD     int    // holds the flock on the staging directory until close; -1 where the filesystem has no flock
	replace    bool   // the target exists and is to be exchanged
	keep       bool   // a failed switch left a tree the user needs at the staging name
	hooks      stageHooks
	record     string         // this restore's record file, "" for none
	keepRecord bool           // something of this restore stays beside the target: its record stays for unlock
	cleaned    []StaleStaging // what the clean-up before the restore found
}

// newStage checks the target, removes what dead restores left beside it,
// and creates and locks the staging directory. It refuses an existing
// target unless replace is set, and then only a real directory that is
// not a mount point. records, when not empty, is the directory where the
// restore notes its staging directory while it runs.
func newStage(target string, replace bool, hooks *stageHooks) (*stage, error) {
	return newStageRecorded(target, replace, hooks, "")
}

func newStageRecorded(target string, replace bool, hooks *stageHooks, records string) (*stage, error) {
	if target == "" {
		return nil, errors.New("no restore target given")
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, fmt.Errorf("restore target %q: %w", target, err)
	}
	s := &stage{target: abs, parent: filepath.Dir(abs), targetName: filepath.Base(abs), parentFD: -1, fd: -1, lockFD: -1, hooks: stageDefaultHooks}
	if hooks != nil {
		s.hooks = *hooks
		if s.hooks.openat2 == nil {
			s.hooks.openat2 = unix.Openat2
		}
		if s.hooks.fsync == nil {
			s.hooks.fsync = unix.Fsync
		}
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
	s.cleaned = cleanStaging(s.parentFD, s.parent, s.hooks.openat2)
	forgetRecords(records, s.cleaned)
	for range 10 {
		s.hex = stageRandom()
		s.name = stagePrefix + s.hex
		s.writeRecord(records)
		err = unix.Mkdirat(s.parentFD, s.name, 0o700)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			break
		}
		if s.fd, err = safeOpenAt(s.parentFD, s.name, unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // another restore's clean-up took it before it was locked
			}
			return nil, errors.Join(fmt.Errorf("opening staging directory %s: %w", s.path(), err), s.abort())
		}
		if s.lock() {
			return s, nil
		}
		_ = unix.Close(s.fd) // taken by a clean-up, which removes it
		s.fd = -1
	}
	s.removeRecord()
	_ = unix.Close(s.parentFD)
	if err == nil {
		err = errors.New("every name tried was taken")
	}
	return nil, fmt.Errorf("creating a staging directory in %s for restore target %s: %w", s.parent, abs, err)
}

// lock takes the staging directory's flock and checks that the directory
// is still the one at the staging name: a clean-up running in another
// process may have found it between its creation and the lock, and then
// holds the lock or has removed it (lock returns false). Where the
// filesystem has no flock the restore goes on unlocked (a clean-up never
// removes what it cannot lock).
func (s *stage) lock() bool {
	fd, err := unix.FcntlInt(uintptr(s.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return true
	}
	err = osutil.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == unix.EWOULDBLOCK:
		_ = unix.Close(fd)
		return false
	case err != nil:
		_ = unix.Close(fd)
		return true
	}
	var st, at unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Nlink == 0 ||
		unix.Fstatat(s.parentFD, s.name, &at, unix.AT_SYMLINK_NOFOLLOW) != nil || at.Dev != st.Dev || at.Ino != st.Ino {
		_ = unix.Close(fd)
		return false
	}
	s.lockFD = fd
	return true
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
		return fmt.Errorf("%w: %s (restore into a new directory, or ask for it to be replaced)", ErrTargetExists, s.target)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("restore target %s exists and is not a directory (a symlink or file); only a directory can be replaced", s.target)
	}
	if err := unix.Fstat(s.parentFD, &pst); err != nil {
		return fmt.Errorf("restore target %s: %w", s.target, err)
	}
	if st.Dev != pst.Dev || mountPointAt(s.parentFD, s.targetName, s.hooks.openat2) {
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
// could not be removed entirely: left then says what stayed, and where.
// On error the target is as it was and the staged tree is still at
// s.path().
func (s *stage) commit() (left *Remains, err error) {
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
	if !s.replace {
		return nil, s.commitNew()
	}
	err = s.hooks.renameat2(s.parentFD, s.name, s.parentFD, s.targetName, unix.RENAME_EXCHANGE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		return s.commitTwoStep()
	}
	if err != nil {
		return nil, fmt.Errorf("exchanging %s with the staged tree: %w", s.target, err)
	}
	if err := s.hooks.fsync(s.parentFD); err != nil {
		if uerr := s.hooks.renameat2(s.parentFD, s.name, s.parentFD, s.targetName, unix.RENAME_EXCHANGE); uerr != nil {
			s.keep = true
			return nil, fmt.Errorf("syncing %s after exchanging %s: %w; undoing the exchange failed too (%v): the new tree is at %s and the old one at %s",
				s.parent, s.target, err, uerr, s.target, s.keepAside(s.name))
		}
		return nil, fmt.Errorf("syncing %s after exchanging %s: %w (exchange undone)", s.parent, s.target, err)
	}
	// The old tree is now under the staging name.
	return s.removeReplaced(s.name), nil
}

// removeReplaced removes the replaced tree, now at name, and returns what
// stayed of it.
func (s *stage) removeReplaced(name string) *Remains {
	left := removeTree(s.parentFD, s.parent, name, s.hooks.openat2)
	if left != nil {
		s.keepRecord = true
	}
	return left
}

// keepAside renames the replaced tree a failed switch could not put back
// from name to .lifeboat-kept-<hex>, which no clean-up removes, and
// returns where it is.
func (s *stage) keepAside(name string) string {
	kept := stageKept + s.hex
	if s.hooks.renameat(s.parentFD, name, s.parentFD, kept) == nil {
		_ = unix.Fsync(s.parentFD)
		return filepath.Join(s.parent, kept)
	}
	return filepath.Join(s.parent, name)
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
	if err := s.hooks.fsync(s.parentFD); err != nil {
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
// RENAME_EXCHANGE. The old tree's name shares the staging name's hex
// digits, so a clean-up recognises the pair a crash between the two
// renames leaves, and removes neither.
func (s *stage) commitTwoStep() (*Remains, error) {
	old := stageOldPre + s.hex
	if err := s.hooks.renameat(s.parentFD, s.targetName, s.parentFD, old); err != nil {
		return nil, fmt.Errorf("moving %s aside (no atomic exchange on this filesystem): %w", s.target, err)
	}
	if err := s.hooks.renameat(s.parentFD, s.name, s.parentFD, s.targetName); err != nil {
		if uerr := s.hooks.renameat(s.parentFD, old, s.parentFD, s.targetName); uerr != nil {
			s.keep = true
			return nil, fmt.Errorf("renaming the staged tree to %s: %w; moving the old tree back failed too (%v): it is at %s and the new tree at %s",
				s.target, err, uerr, filepath.Join(s.parent, old), s.path())
		}
		return nil, fmt.Errorf("renaming the staged tree to %s: %w (old tree moved back)", s.target, err)
	}
	if err := s.hooks.fsync(s.parentFD); err != nil {
		// Both renames are visible; keep the old tree for the user.
		s.keepRecord = true
		p := filepath.Join(s.parent, old)
		return &Remains{Path: p, Kept: []KeptPath{{Path: p, Why: fmt.Sprintf("kept whole: syncing %s after the switch failed (%v); remove it once the target is known good", s.parent, err)}}}, nil
	}
	return s.removeReplaced(old), nil
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
		s.keepRecord = true
		s.close()
		return nil
	}
	left := removeTree(s.parentFD, s.parent, s.name, s.hooks.openat2)
	if left != nil {
		s.keepRecord = true
	}
	s.close()
	if left != nil {
		return fmt.Errorf("removing staging directory: %s", left)
	}
	return nil
}

// close releases the parent directory and the staging lock, and removes
// the restore's record unless something of it stays.
func (s *stage) close() {
	if s.lockFD >= 0 {
		_ = unix.Close(s.lockFD)
		s.lockFD = -1
	}
	if s.parentFD >= 0 {
		_ = unix.Close(s.parentFD)
		s.parentFD = -1
	}
	if !s.keepRecord {
		s.removeRecord()
	}
}
