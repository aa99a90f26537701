package seedtest

import "testing"

// With -seed set, Seed returns it and Rand draws the numbers New gives
// for it: the logged seed replays the run.
func TestFlagReplays(t *testing.T) {
	defer func(old uint64) { *seed = old }(*seed)
	*seed = 0x5eed
	if s := Seed(t); s != 0x5eed {
		t.Fatalf("Seed = %#x with -seed=0x5eed", s)
	}
	a, b := Rand(t), New(0x5eed)
	for range 64 {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("Rand drew %#x, New(0x5eed) %#x", x, y)
		}
	}
}

// Bytes fills every length, a tail shorter than eight included, from
// the generator's words in little-endian order.
func TestBytes(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 64, 1001} {
		b, r := Bytes(New(7), n), New(7)
		if len(b) != n {
			t.Fatalf("Bytes(_, %d) has %d bytes", n, len(b))
		}
		for i := 0; i < n; i += 8 {
			v := r.Uint64()
			for j := i; j < min(i+8, n); j++ {
				if b[j] != byte(v>>(8*(j-i))) {
					t.Fatalf("Bytes(_, %d)[%d] = %#x, want byte %d of word %#x", n, j, b[j], j-i, v)
				}
			}
		}
	}
}
