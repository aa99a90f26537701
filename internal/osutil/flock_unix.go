//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package osutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// Flock is flock(2) on fd with how (unix.LOCK_EX, LOCK_SH, LOCK_UN, with
// LOCK_NB or not), retried while a signal interrupts it. The error is the
// bare errno (EWOULDBLOCK when LOCK_NB finds the lock held), for callers
// to tell apart.
func Flock(fd int, how int) error {
	return IgnoringEINTR(func() error { return unix.Flock(fd, how) })
}

// FlockFile is Flock on f's descriptor, reached through f.SyscallConn so
// f stays in the mode the runtime gave it. The lock ends when f is closed.
func FlockFile(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = Flock(int(fd), how) }); err != nil {
		return err
	}
	return ferr
}
