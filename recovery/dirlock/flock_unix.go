//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// tryFlock takes an exclusive flock on f without blocking. locked is false
// when another open file description holds it.
func tryFlock(f *os.File) (locked bool, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	switch {
	case ferr == nil:
		return true, nil
	case errors.Is(ferr, syscall.EWOULDBLOCK):
		return false, nil
	case errors.Is(ferr, syscall.ENOLCK), errors.Is(ferr, syscall.ENOTSUP), errors.Is(ferr, syscall.EOPNOTSUPP):
		return false, &os.PathError{Op: "flock", Path: f.Name(),
			Err: errors.New("the filesystem of the state root does not support file locks; put the state root on a local filesystem")}
	default:
		return false, &os.PathError{Op: "flock", Path: f.Name(), Err: ferr}
	}
}

// unflock releases f's flock; closing f would too.
func unflock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = syscall.Flock(int(fd), syscall.LOCK_UN) }); err != nil {
		return err
	}
	return ferr
}

// openLockFile opens (creating if needed) the lock file at path. O_CREAT
// without O_TRUNC or O_EXCL: an existing lock file is reused as it is.
// O_NOFOLLOW: a symlink planted in its place is refused. Go sets O_CLOEXEC,
// so no child process inherits the lock.
func openLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
}

// processAlive reports whether a process with this PID exists on this host.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
