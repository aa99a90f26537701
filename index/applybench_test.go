package index_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
)

// benchObjects returns n workspace objects of packs packs of entries
// blobs each.
func benchObjects(r *rand.Rand, n, packs, entries int) []index.Named {
	var objs []index.Named
	for i := range n {
		o := &index.Object{Tier: blob.Workspace}
		for range packs {
			o.Packs = append(o.Packs, randPack(r, entries))
		}
		objs = append(objs, index.Named{ID: blob.ID{byte(i + 1)}, Object: o})
	}
	return objs
}

// BenchmarkApplyCapture applies the index objects of a first capture of
// the benchmark corpus (5 objects, 110,000 blobs) to an empty DB: one by
// one, as each is saved, or merged as the repository does (ApplyAll).
func BenchmarkApplyCapture(b *testing.B) {
	objs := benchObjects(rand.New(rand.NewPCG(1, 2)), 5, 22, 1000)
	run := func(b *testing.B, groups [][]index.Named) {
		for b.Loop() {
			b.StopTimer()
			d, err := index.OpenDB(b.TempDir(), blob.ID{1})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for _, g := range groups {
				if err := d.ApplyAll(g); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = d.Close()
			b.StartTimer()
		}
	}
	b.Run("each", func(b *testing.B) {
		var gs [][]index.Named
		for _, o := range objs {
			gs = append(gs, []index.Named{o})
		}
		run(b, gs)
	})
	b.Run("merged", func(b *testing.B) { run(b, [][]index.Named{objs[:3], objs[3:]}) })
	b.Run("all", func(b *testing.B) { run(b, [][]index.Named{objs}) })
}

// BenchmarkApplyRebuild applies 40 index objects of 16,384 blobs (a
// 655,360-blob repository, as a rebuild does): one by one, or in groups of
// 131,072 blobs, as Sync does (syncGroupEntries).
func BenchmarkApplyRebuild(b *testing.B) {
	objs := benchObjects(rand.New(rand.NewPCG(3, 4)), 40, 16, 1024)
	for _, group := range []int{1, (1 << 17) / 16384} {
		b.Run(fmt.Sprintf("group%d", group), func(b *testing.B) {
			for b.Loop() {
				d, err := index.OpenDB(b.TempDir(), blob.ID{1})
				if err != nil {
					b.Fatal(err)
				}
				for g := range slices.Chunk(objs, group) {
					if err := d.ApplyAll(g); err != nil {
						b.Fatal(err)
					}
				}
				_ = d.Close()
			}
		})
	}
}
