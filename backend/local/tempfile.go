package local

import (
	"os"
)

// tempPrefix starts the name of every temp file; CleanTemp removes only
// files with it.
const tempPrefix = "save-"

// file is what Save writes through; tests swap in one that fails.
type file interface {
	Write(p []byte) (int, error)
	Sync() error
	Close() error
	Name() string
}

// osCreateTemp creates a 0600 temp file and locks it, so CleanTemp in
// another process can tell it is still being written. It is written with
// write-behind on Linux (behind_linux.go).
func osCreateTemp(dir, pattern string) (file, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, false); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return newBehindFile(f), nil
}
