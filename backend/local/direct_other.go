//go:build !linux

package local

import "os"

// newDirectFile returns f: direct I/O is used on Linux only.
func newDirectFile(f *os.File) file { return f }
