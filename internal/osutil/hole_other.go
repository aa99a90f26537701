//go:build !linux

package osutil

// IsHole reports false: without SEEK_DATA no hole is seen.
func IsHole(fd int, off, n int64) bool { return false }
