//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package osutil

// ProcessAlive cannot tell on this operating system and says no.
func ProcessAlive(pid int) bool { return false }
