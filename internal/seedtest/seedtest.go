// Package seedtest is the one seed of the module's randomised tests. It
// registers the -seed flag in every test binary that imports it; Seed
// and Rand log the seed they use, so a failure is replayed with
// go test -run TheTest -seed=0x....
package seedtest

import (
	"flag"
	"math/rand/v2"
	"testing"
)

var seed = flag.Uint64("seed", 0, "seed for randomised tests (0: a fresh random seed)")

// Seed returns the -seed flag's value, or a fresh random seed when it is
// 0, and logs it with the flag that replays it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("random seed %#x (replay with -seed=%#x)", s, s)
	return s
}

// Rand returns a generator seeded with Seed(t).
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	return New(Seed(t))
}

// New returns the generator of seed: the same seed, the same numbers.
func New(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Bytes returns n bytes drawn from r, eight to each Uint64 in
// little-endian order: the same generator state, the same bytes.
func Bytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := i; j < min(i+8, n); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	return b
}
