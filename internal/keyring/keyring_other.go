//go:build !linux

package keyring

import (
	"errors"
	"time"
)

// Open fails: only Linux has the kernel keyring.
func Open(time.Duration, string) (*Cache, error) {
	return nil, errors.New("key cache: only Linux has a kernel keyring")
}

// Get returns nil: only Linux has the kernel keyring.
func (c *Cache) Get(string) []byte { return nil }

// Put keeps nothing: only Linux has the kernel keyring.
func (c *Cache) Put(string, []byte) {}
