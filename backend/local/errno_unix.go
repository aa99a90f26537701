//go:build unix

package local

import (
	"errors"
	"syscall"
)

// isNoSpace reports a full disk or an exhausted quota.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// ignorableSyncErr reports a directory fsync error that only means the
// filesystem does not support it (some FUSE and network filesystems).
func ignorableSyncErr(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP)
}
