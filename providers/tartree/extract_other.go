//go:build !linux

package tartree

import (
	"errors"
	"os"
)

func MkfifoIn(*os.Root, string) error { return errors.ErrUnsupported }
