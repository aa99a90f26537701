package crypt_test

import (
	"math/rand/v2"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// testKDF returns argon2id parameters small enough to keep tests fast.
func testKDF() crypt.KDFParams { return crypt.NewKDFParams(1, 64, 1) }

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustTier(t testing.TB, m *crypt.MasterKeys, tier blob.Tier) *crypt.TierKeys {
	t.Helper()
	k, err := m.Tier(tier)
	if err != nil {
		t.Fatalf("Tier(%s): %v", tier, err)
	}
	return k
}

// fixedKey returns a key whose bytes are b, b+1, ... so pinned samples are reproducible.
func fixedKey(b byte) crypt.Key {
	var k crypt.Key
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}
