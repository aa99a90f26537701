package crypt

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/zeebo/blake3"
)

// A KEKCache keeps the key-encryption keys that passwords were turned
// into, between processes, so that a command run shortly after another
// with the same password and key file does not derive it again
// (docs/keys.md, "The key cache"). Entries are sealed under a key that
// only the password and the cache's secret give (kekWrapKey), so the
// cache never holds a key in plaintext and an entry unlocks nothing
// without both. Get returns nil for a name it does not hold; neither
// method reports failure: a cache that cannot keep an entry only costs a
// derivation. Secret is a random value kept apart from the entries (a
// file only the user may read), nil for none.
type KEKCache interface {
	Get(name string) []byte
	Put(name string, sealed []byte)
	Secret() []byte
}

// KEKCacheName is the name of the cache entry for a key file with these
// KDF parameters: a hash of its public salt and cost, so the name tells
// nothing about the password and differs for every key file.
func KEKCacheName(p KDFParams) string {
	h := blake3.New()
	h.Write([]byte("lifeboat key cache name\x00"))
	writeKDFParams(h, p)
	sum := h.Sum(nil)
	return "lifeboat:kek:" + hex.EncodeToString(sum[:16])
}

// kekWrapKey is the key an entry is sealed under: a hash of the
// password with the key file's salt and cost and the cache's secret.
// It is fast to compute, so whoever reads an entry and the secret can
// test guesses of the password at hashing speed rather than argon2id's;
// docs/keys.md says so, and the command line caches only passwords from
// a file or the environment.
func kekWrapKey(p KDFParams, password, secret []byte) Key {
	h := blake3.NewDeriveKey("lifeboat 2026-12 key cache entry")
	writeKDFParams(h, p)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(secret)))
	_, _ = h.Write(n[:])
	_, _ = h.Write(secret)
	_, _ = h.Write(password)
	var k Key
	_, _ = h.Digest().Read(k[:])
	return k
}

func writeKDFParams(h *blake3.Hasher, p KDFParams) {
	var b [9]byte
	binary.LittleEndian.PutUint32(b[0:], p.Time)
	binary.LittleEndian.PutUint32(b[4:], p.MemoryKiB)
	b[8] = p.Threads
	_, _ = h.Write(b[:])
	_, _ = h.Write(p.Salt)
}

// cachedKEK returns the key-encryption key the cache holds for p and
// password, if it holds one sealed under that password.
func cachedKEK(c KEKCache, p KDFParams, password []byte) (Key, bool) {
	var kek Key
	if c == nil {
		return kek, false
	}
	name := KEKCacheName(p)
	sealed := c.Get(name)
	if len(sealed) != Overhead+KeySize {
		return kek, false
	}
	wrap := kekWrapKey(p, password, c.Secret())
	defer clear(wrap[:])
	plain, err := NewSealer(wrap).Open(nil, sealed, []byte(name))
	if err != nil || len(plain) != KeySize {
		return kek, false
	}
	copy(kek[:], plain)
	clear(plain)
	return kek, true
}

// keepKEK seals kek under password and keeps it in the cache. Callers
// keep only a key that has just opened or made a key file.
func keepKEK(c KEKCache, p KDFParams, password []byte, kek Key) {
	if c == nil {
		return
	}
	name := KEKCacheName(p)
	wrap := kekWrapKey(p, password, c.Secret())
	defer clear(wrap[:])
	c.Put(name, NewSealer(wrap).Seal(nil, kek[:], []byte(name)))
}
