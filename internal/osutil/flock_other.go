//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package osutil

import (
	"errors"
	"os"
)

// Flock is unsupported on this operating system.
func Flock(fd int, how int) error { return errors.ErrUnsupported }

// FlockFile is unsupported on this operating system.
func FlockFile(f *os.File, how int) error { return errors.ErrUnsupported }
