package prune

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A prune keeps its live set and tree set in a scratch directory,
// <TempDir>/lifeboat-prune-*, that Plan.Close removes. A killed prune
// never closes its plan, so each prune, once it has made its own
// directory, removes the ones beside it whose prune is gone.
//
// Whether a prune is gone is the kernel's word: a prune holds an
// exclusive flock on the file scratchLock in its directory for as long as
// it lives, and the kernel drops it when the process ends, however it
// ends. A flock belongs to an open file description, not to a process,
// so prunes in one process (serve prunes several repositories) exclude
// each other too. The lock file gets its name only once it is locked:
// a directory whose lock file can be locked is one whose prune died.
const (
	scratchPrefix  = "lifeboat-prune-"
	scratchLock    = "lifeboat-prune.lock"
	scratchLockNew = scratchLock + ".new" // its name until it is locked
	// scratchUnlockedAge: a directory without a lock file was made by a
	// lifeboat older than the lock, or by a prune killed before it
	// locked. It is removed once this old, if it holds only files a
	// prune makes. (An older lifeboat's prune still running then would
	// fail for want of its files; a prune that fails anywhere leaves the
	// repository sound.)
	scratchUnlockedAge = 24 * time.Hour
)

// makeScratch makes a locked scratch directory in parent ("" is
// os.TempDir()) and removes the stale ones beside it. The caller removes
// dir, then closes lock (nil when the file system could not lock: the
// prune goes on, and its directory is then like an unlocked one).
func makeScratch(parent string) (dir string, lock *os.File, err error) {
	dir, err = os.MkdirTemp(parent, scratchPrefix)
	if err != nil {
		return "", nil, err
	}
	lock = lockScratch(dir)
	removeStaleScratch(filepath.Dir(dir), filepath.Base(dir))
	return dir, lock, nil
}

// lockScratch makes and locks dir's lock file, or returns nil.
func lockScratch(dir string) *os.File {
	tmp := filepath.Join(dir, scratchLockNew)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil
	}
	if err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		err = os.Rename(tmp, filepath.Join(dir, scratchLock))
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil
	}
	return f
}

// removeStaleScratch removes the scratch directories in parent, other
// than own, whose prune is gone. It looks only at real directories (no
// symbolic link is followed) of this user, and ignores what it cannot
// remove: a leftover must not stop a prune.
func removeStaleScratch(parent, own string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), scratchPrefix) || e.Name() == own {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uint32(os.Getuid()) {
			continue
		}
		f, err := tryLockScratch(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if time.Since(fi.ModTime()) > scratchUnlockedAge && onlyPruneFiles(dir) {
				_ = os.RemoveAll(dir)
			}
		case err == nil:
			// Locked until f is closed, so no other prune removes it at once.
			_ = os.RemoveAll(dir)
			_ = f.Close()
		}
	}
}

// tryLockScratch opens the lock file of the scratch directory dir anew
// and takes its flock without waiting: it fails with unix.EWOULDBLOCK
// while the lock is held, in this process or another.
func tryLockScratch(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, scratchLock), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// onlyPruneFiles reports whether dir holds only regular files with the
// names a prune gives its files.
func onlyPruneFiles(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		run, _ := filepath.Match(liveRunPattern, e.Name())
		if !e.Type().IsRegular() || !run && e.Name() != treeSetFile && e.Name() != scratchLockNew {
			return false
		}
	}
	return true
}
