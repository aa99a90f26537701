//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package dirlock

import (
	"errors"
	"os"
	"syscall"

	"lifeboat/internal/osutil"
)

// tryFlock takes an exclusive flock on f without blocking. locked is false
// when another open file description holds it.
func tryFlock(f *os.File) (locked bool, err error) {
	ferr := osutil.FlockFile(f, syscall.LOCK_EX|syscall.LOCK_NB)
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
	return osutil.FlockFile(f, syscall.LOCK_UN)
}

// openLockFile opens (creating if needed) the lock file at path. O_CREAT
// without O_TRUNC or O_EXCL: an existing lock file is reused as it is.
// O_NOFOLLOW: a symlink planted in its place is refused. Go sets O_CLOEXEC,
// so no child process inherits the lock.
func openLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
}
