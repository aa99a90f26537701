//go:build !linux

package tartree

import (
	"errors"
	"os"
)

func mkfifoIn(*os.Root, string) error { return errors.ErrUnsupported }
