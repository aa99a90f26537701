//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package dirlock

import (
	"errors"
	"os"
)

var errNoFlock = errors.New("directory-merge locks need flock, which this operating system does not have")

func tryFlock(f *os.File) (bool, error)          { return false, errNoFlock }
func unflock(f *os.File) error                   { return errNoFlock }
func openLockFile(path string) (*os.File, error) { return nil, errNoFlock }
