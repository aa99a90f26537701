// Package keyring keeps small sealed values in the calling user's Linux
// kernel keyring for a limited time: the command line's cache of
// key-encryption keys (crypt.KEKCache, docs/keys.md "The key cache").
//
// Entries go into the user keyring (@u) as "user" keys that only their
// possessor may view, read, change or search, with a timeout after which
// the kernel removes them; each is made in the process keyring, given its
// timeout and permissions there, and only then moved to @u, so no entry
// is ever in @u without them. The processes of the same user on this
// machine whose session keyring links @u (a login session's) possess it;
// other users' processes, and processes in another user namespace, do
// not. Beside the entries, a random secret in a file only the user may
// read (Secret) goes into every entry's seal, so reading the keyring
// alone is not enough to test passwords against an entry. Elsewhere than
// Linux, or where the kernel refuses the keyring (a seccomp filter, a
// quota half used), the cache keeps nothing and every command derives
// its key as without it.
package keyring

import "time"

// MaxTTL bounds how long an entry lives: the kernel counts the timeout in
// 32-bit seconds, and a cache of a day is already long.
const MaxTTL = 24 * time.Hour

// Cache is a keyring cache whose entries live for ttl.
type Cache struct {
	ttl        time.Duration
	secret     []byte
	unreadable bool // a Get found an entry this process may not read: Put would only replace it
}

// maxValue bounds what Get reads: a sealed 32-byte key is 72 bytes.
const maxValue = 256

// secretFile is the name of the cache's secret in its directory.
const secretFile = "key-cache-secret"

// Secret is the random value mixed into every entry's seal.
func (c *Cache) Secret() []byte { return c.secret }
