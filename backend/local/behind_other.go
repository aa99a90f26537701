//go:build !linux

package local

import "os"

// newBehindFile returns f: write-behind is used on Linux only.
func newBehindFile(f *os.File) file { return f }
