package index_test

import (
	"bytes"
	"cmp"
	"slices"
	"testing"

	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// KeyOrder orders keys as bytes.Compare does, equal keys in their own
// order, also where keys share their first eight bytes or more.
func TestKeyOrder(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	const size = index.KeySize
	bases := make([][]byte, 4)
	for i := range bases {
		bases[i] = make([]byte, size)
		for j := range bases[i] {
			bases[i][j] = byte(r.Uint32())
		}
	}
	const n = 5000
	keys := make([]byte, 0, n*size)
	for range n {
		// A base's first 0 to size bytes (all of it: a repeated key),
		// then random bytes from a small alphabet, so that heads and
		// tails collide often.
		k := slices.Clone(bases[r.IntN(len(bases))][:r.IntN(size+1)])
		for len(k) < size {
			k = append(k, byte(r.IntN(3)))
		}
		keys = append(keys, k...)
	}
	key := func(i int) []byte { return keys[i*size : (i+1)*size] }
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
	got := index.KeyOrder(keys)
	if !slices.Equal(got, want) {
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("position %d: key %d (%x), want key %d (%x)", j, got[j], key(got[j]), want[j], key(want[j]))
			}
		}
		t.Fatalf("got %d keys, want %d", len(got), len(want))
	}
	if len(index.KeyOrder(nil)) != 0 {
		t.Error("KeyOrder(nil) is not empty")
	}
}
