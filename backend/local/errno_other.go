//go:build !unix

package local

import (
	"errors"
	"syscall"
)

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

func ignorableSyncErr(err error) bool { return errors.Is(err, syscall.EINVAL) }
