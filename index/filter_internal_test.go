package index

import (
	"math/rand/v2"
	"testing"

	"lifeboat/blob"
)

// A Bloom filter has no false negatives, and few false positives at the
// load it is sized for.
func TestBlobFilter(t *testing.T) {
	t.Parallel()
	const seed = 7
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	key := func() []byte {
		var id blob.ID
		for i := range id {
			id[i] = byte(r.Uint32())
		}
		return blobKey(blob.Tiers[r.IntN(len(blob.Tiers))], blob.Type(1+r.IntN(2)), id)
	}
	f := newBlobFilter(20000)
	if f.room != 2*20000+filterMinRoom || int64(len(f.words))*64 < f.room*filterBitsPerKey {
		t.Fatalf("filter of %d words for room %d", len(f.words), f.room)
	}
	in := make([][]byte, f.room)
	for i := range in {
		in[i] = key()
		f.add(in[i])
	}
	for _, k := range in {
		if !f.mayContain(k) {
			t.Fatalf("key %x added but ruled out", k)
		}
	}
	fp := 0
	const tries = 200000
	for range tries {
		if f.mayContain(key()) {
			fp++
		}
	}
	if fp > tries/200 { // 0.5%; about 0.05% expected
		t.Fatalf("%d false positives in %d", fp, tries)
	}
	// The same id as another tier or type probes elsewhere.
	k := in[0]
	other := append([]byte{k[0], k[1] ^ 3}, k[2:]...)
	if filterHashesEqual(k, other) {
		t.Fatal("a different type hashes the same")
	}
}

func filterHashesEqual(a, b []byte) bool {
	a1, a2 := filterHashes(a)
	b1, b2 := filterHashes(b)
	return a1 == b1 && a2 == b2
}
