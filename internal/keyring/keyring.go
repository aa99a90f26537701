// Package keyring keeps small sealed values in the calling user's Linux
// kernel keyring for a limited time: the command line's cache of
// key-encryption keys (crypt.KEKCache, docs/keys.md "The key cache").
//
// Entries go into the user keyring (@u) as "user" keys that only their
// possessor may view, read, change or search; every process of the same
// user on this machine possesses that keyring, no other user's process
// does, and the kernel removes an entry when its timeout passes. The
// values are kernel memory: never swapped, never in a file. Elsewhere
// than Linux, or where the kernel refuses the keyring (a seccomp filter,
// a full quota), the cache keeps nothing and every command derives its
// key as without it.
package keyring

import "time"

// Cache is a keyring cache whose entries live for TTL.
type Cache struct {
	TTL time.Duration
}

// New returns a cache whose entries live for ttl (at least a second).
func New(ttl time.Duration) *Cache { return &Cache{TTL: max(ttl, time.Second)} }

// maxValue bounds what Get reads: a sealed 32-byte key is 72 bytes.
const maxValue = 256
