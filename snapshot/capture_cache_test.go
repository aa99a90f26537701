package snapshot

import (
	"bytes"
	"encoding/binary"
	"testing"

	"lifeboat/blob"
)

// capIDs keeps each entry's ids contiguous and intact: one id or many,
// a list that does not fit in what is left of a chunk, a list longer
// than a chunk, an empty one.
func TestCapIDs(t *testing.T) {
	var a capIDs
	id := func(i int) blob.ID { return blob.ID{byte(i), byte(i >> 8), byte(i >> 16), 1} }
	var refs []capIDRef
	var want [][]blob.ID
	n := 0
	for _, size := range []int{1, 1, 3, capChunk - 4, 2, 1, 2 * capChunk, 1, 0, 5} {
		ids := make([]blob.ID, size)
		for i := range ids {
			ids[i] = id(n)
			n++
		}
		refs = append(refs, a.add(ids))
		want = append(want, append([]blob.ID(nil), ids...))
		clear(ids) // add copied them
	}
	for i, ref := range refs {
		got := a.at(ref)
		if len(got) != len(want[i]) || cap(got) != len(got) {
			t.Fatalf("list %d: %d ids (cap %d), want %d", i, len(got), cap(got), len(want[i]))
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Fatalf("list %d, id %d: %x, want %x", i, j, got[j][:4], want[i][j][:4])
			}
		}
	}
}

// capSortByKey orders entries by key: random keys, keys sharing their
// first half (one directory's files), equal leading bytes, none and one.
func TestCapSortByKey(t *testing.T) {
	rng := capTestRand(t)
	for _, n := range []int{0, 1, 2, 1000, 3*capChunk + 17} {
		var puts capChunked[capPut]
		for i := range n {
			var p capPut
			for w := 0; w < len(p.key); w += 8 {
				binary.LittleEndian.PutUint64(p.key[w:], rng.Uint64())
			}
			switch i % 4 {
			case 1: // same directory as the entry before
				copy(p.key[:16], puts.at(i - 1).key[:16])
			case 2: // same first two bytes only
				copy(p.key[:2], puts.at(i - 1).key[:2])
			}
			puts.add(p)
		}
		order := capSortByKey(&puts)
		if len(order) != n {
			t.Fatalf("n=%d: %d indexes", n, len(order))
		}
		seen := make([]bool, n)
		for j, i := range order {
			if seen[i] {
				t.Fatalf("n=%d: index %d twice", n, i)
			}
			seen[i] = true
			if j > 0 && bytes.Compare(puts.at(int(order[j-1])).key[:], puts.at(int(i)).key[:]) > 0 {
				t.Fatalf("n=%d: keys out of order at %d", n, j)
			}
		}
	}
}
