//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package local

import (
	"os"
	"syscall"
)

const haveFlock = true

// lockFile takes an exclusive flock on f, failing at once when another
// open file holds it if nonblock. The lock ends when f is closed.
func lockFile(f *os.File, nonblock bool) error {
	how := syscall.LOCK_EX
	if nonblock {
		how |= syscall.LOCK_NB
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	err = rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), how)
			if lerr != syscall.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if lerr == syscall.ENOLCK || lerr == syscall.ENOTSUP || lerr == syscall.EOPNOTSUPP {
		return nil // no locking here; CleanTemp falls back on age alone
	}
	if lerr != nil {
		return &os.PathError{Op: "flock", Path: f.Name(), Err: lerr}
	}
	return nil
}
