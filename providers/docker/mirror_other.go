//go:build !linux

package docker

import (
	"errors"
	"os"
)

func mkfifoIn(*os.Root, string) error { return errors.ErrUnsupported }
