package crypt_test

import (
	"flag"
	"math/rand/v2"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomised tests (0: a fresh random seed)")

// testKDF returns argon2id parameters small enough to keep tests fast.
func testKDF() crypt.KDFParams { return crypt.NewKDFParams(1, 64, 1) }

// newRand returns a seeded generator and logs the seed so a failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("random seed %#x (replay with -seed=%#x)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

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
