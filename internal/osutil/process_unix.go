//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package osutil

import "golang.org/x/sys/unix"

// ProcessAlive reports whether a process with this PID exists on this
// host: signal 0 reaches it, or it exists but belongs to another user
// (EPERM). A PID of 0 or below is never alive.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
