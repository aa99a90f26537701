package snapshot

import (
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
