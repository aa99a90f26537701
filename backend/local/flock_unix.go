//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package local

import (
	"os"
	"syscall"

	"lifeboat/internal/osutil"
)

const haveFlock = true

// lockFile takes an exclusive flock on f, failing at once when another
// open file holds it if nonblock. The lock ends when f is closed.
func lockFile(f *os.File, nonblock bool) error {
	how := syscall.LOCK_EX
	if nonblock {
		how |= syscall.LOCK_NB
	}
	lerr := osutil.FlockFile(f, how)
	if lerr == syscall.ENOLCK || lerr == syscall.ENOTSUP || lerr == syscall.EOPNOTSUPP {
		return nil // no locking here; CleanTemp falls back on age alone
	}
	if lerr != nil {
		return &os.PathError{Op: "flock", Path: f.Name(), Err: lerr}
	}
	return nil
}
