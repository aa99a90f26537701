package pack

import (
	"math/bits"
	"testing"

	"lifeboat/internal/seedtest"
)

func TestPadmeKnownValues(t *testing.T) {
	t.Parallel()
	// Pinned: pack sizes on storage follow these.
	for n, want := range map[int64]int64{
		0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 7: 7, 8: 8, 9: 10, 10: 10, 11: 12, 17: 18,
		1000: 1024, 1024: 1024, 1025: 1088, 4096: 4096, 4097: 4352, 5000: 5120,
		1 << 20: 1 << 20, 1<<20 + 1: 1<<20 + 1<<15, 16_000_000: 16_252_928,
		1<<31 - 1: 1 << 31,
	} {
		if got := padme(n); got != want {
			t.Errorf("padme(%d) = %d, want %d", n, got, want)
		}
	}
}

func checkPadme(t *testing.T, n int64) {
	p := padme(n)
	if p < n {
		t.Fatalf("padme(%d) = %d is shorter", n, p)
	}
	if n >= 1024 && float64(p-n) > 0.12*float64(n) {
		t.Fatalf("padme(%d) = %d: overhead %.1f%% above 12%%", n, p, 100*float64(p-n)/float64(n))
	}
	if n >= 2 {
		// Only the top floor(log2 E)+1 bits of the mantissa may be set
		// (E = floor(log2 n)): that is what bounds the leak.
		e := bits.Len64(uint64(n)) - 1
		s := bits.Len64(uint64(e))
		if low := uint64(p) & (1<<(e-s) - 1); low != 0 && bits.Len64(uint64(p)) == e+1 {
			t.Fatalf("padme(%d) = %#x keeps low bits %#x", n, p, low)
		}
	}
}

func TestPadmeProperties(t *testing.T) {
	t.Parallel()
	prev := int64(0)
	for n := int64(0); n <= 1<<20; n++ {
		checkPadme(t, n)
		p := padme(n)
		if p < prev {
			t.Fatalf("padme not monotone: padme(%d) = %d < padme(%d) = %d", n, p, n-1, prev)
		}
		if padme(p) != p {
			t.Fatalf("padme(padme(%d)) = %d, not a fixed point %d", n, padme(p), p)
		}
		prev = p
	}
	r := seedtest.Rand(t)
	for range 100_000 {
		a, b := r.Int64N(MaxPackSize), r.Int64N(MaxPackSize)
		checkPadme(t, a)
		if a <= b && padme(a) > padme(b) {
			t.Fatalf("padme not monotone: padme(%d) = %d > padme(%d) = %d", a, padme(a), b, padme(b))
		}
	}
	// The number of distinct padded sizes in [2^k, 2^(k+1)) is tiny.
	distinct := map[int64]bool{}
	for n := int64(1 << 24); n < 1<<25; n += 997 {
		distinct[padme(n)] = true
	}
	if len(distinct) > 33 { // multiples of 2^19, and 2^25
		t.Fatalf("%d distinct padded sizes between 16 and 32 MiB", len(distinct))
	}
}
