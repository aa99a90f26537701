package index_test

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
)

// BenchmarkLookup looks up blobs in a DB of 100k entries (in objects of
// packs of 20 blobs), half of them present.
func BenchmarkLookup(b *testing.B) {
	const n = 100_000
	r := rand.New(rand.NewPCG(1, 1))
	d := mustOpenDB(b, b.TempDir(), testRepo)
	defer d.Close()
	var ids []blob.ID
	for len(ids) < n {
		o := &index.Object{Tier: blob.Workspace}
		for range 10_000 / 20 {
			p := randDataPack(r, 20)
			for _, e := range p.Entries {
				ids = append(ids, e.ID)
			}
			o.Packs = append(o.Packs, p)
		}
		mustApply(b, r, d, o)
	}
	misses := make([]blob.ID, 1<<16)
	for i := range misses {
		misses[i] = randID(r)
	}
	b.Run("hit", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok, err := d.Lookup(blob.Workspace, blob.Data, ids[i%len(ids)]); !ok || err != nil {
				b.Fatalf("hit not found: %v", err)
			}
			i += 7919 // a prime: visit the ids out of order
		}
	})
	b.Run("miss", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok, err := d.Lookup(blob.Workspace, blob.Data, misses[i%len(misses)]); ok || err != nil {
				b.Fatalf("miss found: %v", err)
			}
			i++
		}
	})
	b.Run("hit-parallel", func(b *testing.B) {
		var start atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(n / 8))
			for pb.Next() {
				if _, ok, err := d.Lookup(blob.Workspace, blob.Data, ids[i%len(ids)]); !ok || err != nil {
					b.Errorf("hit not found: %v", err)
					return
				}
				i += 7919
			}
		})
	})
}
