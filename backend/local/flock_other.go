//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package local

import "os"

const haveFlock = false

// lockFile is a no-op here; CleanTemp relies on age alone.
func lockFile(f *os.File, nonblock bool) error { return nil }
