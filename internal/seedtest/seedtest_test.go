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
