package dirlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// held is this process's table of lock files taken or being taken, by
// canonical lock file path. It excludes goroutines before any file is
// opened: a second open file description would exclude them too on a local
// filesystem, but not where flock is emulated with per-process POSIX locks
// (NFS), and closing it there would even drop the holder's lock.
var held = struct {
	sync.Mutex
	m map[string]Owner
}{m: map[string]Owner{}}

// Lock is a held directory-merge lock. Release it with Unlock.
type Lock struct {
	f         *os.File
	path      string // lock file
	owner     Owner
	unlockErr error
	once      sync.Once
}

// attempt makes one non-blocking try for the lock file at path. Exactly
// one of lk, busy, err is non-nil.
func (l *Locker) attempt(canon, path, purpose string) (lk *Lock, busy *BusyError, err error) {
	me := Owner{PID: os.Getpid(), Host: l.host, ProcessStart: processStart, Target: canon, Purpose: purpose, InProcess: true}
	held.Lock()
	if o, ok := held.m[path]; ok {
		held.Unlock()
		return nil, &BusyError{Target: canon, LockFile: path, Holder: o, HolderKnown: true}, nil
	}
	held.m[path] = me // reserved while the file is tried
	held.Unlock()

	f, locked, err := lockPath(path)
	if err != nil || !locked {
		held.Lock()
		delete(held.m, path)
		held.Unlock()
		if err != nil {
			return nil, nil, fmt.Errorf("dirlock: locking %s for %s: %w", path, canon, err)
		}
		o, ok := ReadOwner(ownerPath(path))
		return nil, &BusyError{Target: canon, LockFile: path, Holder: o, HolderKnown: ok}, nil
	}
	me.Acquired = l.clk.Now()
	held.Lock()
	held.m[path] = me
	held.Unlock()
	// Best effort: the sidecar is diagnostics, and a lock that works is
	// worth more than its description.
	_ = writeOwner(ownerPath(path), me)
	return &Lock{f: f, path: path, owner: me}, nil, nil
}

// lockPath opens the lock file at path and tries its flock. Having the
// flock, it checks that path still names the inode it locked; if the file
// was replaced in between (only ever by something outside Lifeboat), it
// lets go and tries the new one.
func lockPath(path string) (*os.File, bool, error) {
	for range replacedRetries {
		f, err := openLockFile(path)
		if err != nil {
			return nil, false, err
		}
		locked, err := tryFlock(f)
		if err != nil || !locked {
			f.Close()
			return nil, false, err
		}
		same, err := sameInode(f, path)
		if err != nil {
			f.Close()
			return nil, false, err
		}
		if same {
			return f, true, nil
		}
		f.Close()
	}
	return nil, false, ErrLockFileReplaced
}

// sameInode reports whether path names the file f has open.
func sameInode(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// Target is the canonical target path this lock guards.
func (k *Lock) Target() string { return k.owner.Target }

// LockFile is the path of the lock file.
func (k *Lock) LockFile() string { return k.path }

// Owner is what this lock recorded in its sidecar.
func (k *Lock) Owner() Owner { o := k.owner; o.InProcess = false; return o }

// Verify checks that the lock file at the lock's path is still the inode
// this lock holds: call it before an irreversible step (the switch). A
// mismatch is ErrLockFileReplaced.
func (k *Lock) Verify() error {
	same, err := sameInode(k.f, k.path)
	if err != nil {
		return fmt.Errorf("dirlock: checking lock file %s: %w", k.path, err)
	}
	if !same {
		return fmt.Errorf("dirlock: %s (guarding %s): %w", k.path, k.owner.Target, ErrLockFileReplaced)
	}
	return nil
}

// Unlock releases the lock: it removes the sidecar while still holding the
// lock (so it never removes the next holder's), releases the flock, closes
// the file and frees the in-process entry. The lock file stays. Calling it
// again returns the first result.
func (k *Lock) Unlock() error {
	k.once.Do(func() {
		var errs []error
		if err := os.Remove(ownerPath(k.path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		if err := unflock(k.f); err != nil {
			errs = append(errs, err)
		}
		if err := k.f.Close(); err != nil {
			errs = append(errs, err)
		}
		held.Lock()
		delete(held.m, k.path)
		held.Unlock()
		if err := errors.Join(errs...); err != nil {
			k.unlockErr = fmt.Errorf("dirlock: releasing %s: %w", k.path, err)
		}
	})
	return k.unlockErr
}
