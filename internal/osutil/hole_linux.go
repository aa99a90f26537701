//go:build linux

package osutil

import "golang.org/x/sys/unix"

// IsHole reports whether bytes [off, off+n) of fd are a hole (no data
// up to their end). Filesystems without SEEK_DATA report data.
func IsHole(fd int, off, n int64) bool {
	if n == 0 {
		return false
	}
	next, err := unix.Seek(fd, off, unix.SEEK_DATA)
	if err == unix.ENXIO { // no data at or after off
		return true
	}
	return err == nil && next >= off+n
}
