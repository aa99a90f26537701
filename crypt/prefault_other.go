//go:build !linux

package crypt

// prefaultHuge is a no-op where transparent huge pages do not exist.
func prefaultHuge(int) {}
