package index

import (
	"bytes"
	"cmp"
	"flag"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// keyOrder orders keys as bytes.Compare does, equal keys in their own
// order, also where keys share their first eight bytes or more.
func TestKeyOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if f := flag.Lookup("seed"); f != nil && f.Value.String() != "0" { // helpers_test.go's flag
		seed, _ = strconv.ParseUint(f.Value.String(), 10, 64)
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	bases := make([][]byte, 4)
	for i := range bases {
		bases[i] = make([]byte, keySize)
		for j := range bases[i] {
			bases[i][j] = byte(r.Uint32())
		}
	}
	const n = 5000
	keys := make([]byte, 0, n*keySize)
	for range n {
		// A base's first 0 to keySize bytes (all of it: a repeated
		// key), then random bytes from a small alphabet, so that
		// heads and tails collide often.
		k := slices.Clone(bases[r.IntN(len(bases))][:r.IntN(keySize+1)])
		for len(k) < keySize {
			k = append(k, byte(r.IntN(3)))
		}
		keys = append(keys, k...)
	}
	key := func(i int) []byte { return keys[i*keySize : (i+1)*keySize] }
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	slices.SortFunc(want, func(a, b int) int {
		if c := bytes.Compare(key(a), key(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	got := keyOrder(keys)
	if !slices.Equal(got, want) {
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("position %d: key %d (%x), want key %d (%x)", j, got[j], key(got[j]), want[j], key(want[j]))
			}
		}
		t.Fatalf("got %d keys, want %d", len(got), len(want))
	}
	if len(keyOrder(nil)) != 0 {
		t.Error("keyOrder(nil) is not empty")
	}
}
