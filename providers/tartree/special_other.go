//go:build !linux

package tartree

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// Outside Linux symlink times are left as they are and no socket or
// device node is made.

func LutimesIn(*os.Root, string, time.Time) error { return nil }

func MknodIn(*os.Root, string, fs.FileMode) error { return errors.ErrUnsupported }
