package crypt_test

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// mapKEKCache is a KEKCache in a map, with the secret "pepper" (the
// kernel keyring's own test is in internal/keyring).
type mapKEKCache map[string][]byte

func (c mapKEKCache) Get(name string) []byte         { return c[name] }
func (c mapKEKCache) Put(name string, sealed []byte) { c[name] = slices.Clone(sealed) }
func (c mapKEKCache) Secret() []byte                 { return []byte("pepper") }

// otherSecretCache holds the same entries under another secret.
type otherSecretCache struct{ mapKEKCache }

func (otherSecretCache) Secret() []byte { return []byte("salt") }

// A key file made or opened with a cache keeps its key-encryption key
// there, sealed; the next open with the same password derives nothing, a
// wrong password is still refused (and derived, as without a cache), and
// an entry that is damaged or belongs to another key file is passed over.
// (Not parallel: it reads the process-wide derivation counter.)
func TestKEKCache(t *testing.T) {
	m := crypt.NewMasterKeys()
	cache := mapKEKCache{}
	before := crypt.KeyDerivations()
	data, err := crypt.NewKeyFile(m, blob.Tiers, testPassword, testKDF(), testRepoID, crypt.KeyFileMeta{}, cache)
	if err != nil {
		t.Fatal(err)
	}
	kf, err := crypt.DecodeKeyFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(cache) != 1 {
		t.Fatalf("after NewKeyFile the cache holds %d entries, want 1", len(cache))
	}
	var name string
	for n, v := range cache {
		name = n
		if bytes.Contains(v, testPassword) || len(v) != crypt.Overhead+crypt.KeySize {
			t.Fatalf("entry %s is %d bytes (want %d, sealed) or holds the password", n, len(v), crypt.Overhead+crypt.KeySize)
		}
	}
	derived := func() uint64 { return crypt.KeyDerivations() - before }
	if derived() != 1 {
		t.Fatalf("NewKeyFile derived %d keys, want 1", derived())
	}

	got, err := kf.OpenCached(testPassword, testRepoID, cache)
	if err != nil {
		t.Fatal(err)
	}
	if derived() != 1 {
		t.Fatalf("an open with the cached key derived: %d derivations in all, want 1", derived())
	}
	if a, b := mustTier(t, got, blob.Sensitive), mustTier(t, m, blob.Sensitive); a.Enc != b.Enc || a.IDKey != b.IDKey {
		t.Fatal("the cached key opened other keys")
	}

	if _, err := kf.OpenCached([]byte("wrong"), testRepoID, cache); !errors.Is(err, crypt.ErrWrongPassword) {
		t.Fatalf("wrong password with a cached key: %v, want ErrWrongPassword", err)
	}
	if derived() != 2 {
		t.Fatalf("a wrong password derived %d keys in all, want 2 (the entry is sealed under the right one)", derived())
	}
	if _, err := kf.OpenCached(testPassword, blob.ID{9}, cache); !errors.Is(err, crypt.ErrWrongPassword) {
		t.Fatalf("the key file of another repository opened with the cached key: %v", err)
	}

	// The same entries with another secret: derived again.
	if _, ok := kf.OpenFromCache(testPassword, testRepoID, otherSecretCache{cache}); ok {
		t.Fatal("an entry opened with another cache secret")
	}
	// Entries too short, too long or empty open nothing.
	good := slices.Clone(cache[name])
	for _, v := range [][]byte{nil, good[:len(good)-1], append(slices.Clone(good), 0)} {
		cache[name] = v
		if _, ok := kf.OpenFromCache(testPassword, testRepoID, cache); ok {
			t.Fatalf("an entry of %d bytes opened the key file", len(v))
		}
	}
	cache[name] = good

	// A damaged entry: derived again, and the entry mended.
	cache[name][len(cache[name])-1] ^= 1
	damaged := slices.Clone(cache[name])
	if _, err := kf.OpenCached(testPassword, testRepoID, cache); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(cache[name], damaged) {
		t.Fatal("the damaged entry was not replaced")
	}
	if _, err := kf.OpenCached(testPassword, testRepoID, cache); err != nil {
		t.Fatal(err)
	}
	if derived() != 4 {
		t.Fatalf("derivations in all: %d, want 4 (one for the damaged entry, none after it was mended)", derived())
	}

	// Another key file with the same password has an entry of its own.
	other, err := crypt.NewKeyFile(m, blob.Tiers, testPassword, testKDF(), testRepoID, crypt.KeyFileMeta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	okf, err := crypt.DecodeKeyFile(other)
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Collect(maps.Keys(cache))
	if _, err := okf.OpenCached(testPassword, testRepoID, cache); err != nil {
		t.Fatal(err)
	}
	if len(cache) != 2 || derived() != 6 {
		t.Fatalf("another key file: %d entries (was %v), %d derivations; want 2 entries, 6 derivations", len(cache), names, derived())
	}

	// No cache: every open derives, as before.
	if _, err := kf.Open(testPassword, testRepoID); err != nil || derived() != 7 {
		t.Fatalf("Open without a cache: %v, %d derivations, want 7", err, derived())
	}
}
