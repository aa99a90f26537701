package index_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// The filter never rules out a key the DB holds, whatever runs
// beside it. Two goroutines apply objects (the filter is small, so it
// overflows, is dropped and rebuilt many times); four look up random ids
// (the misses that build it) and ids whose Apply has returned (each must
// be found); one writes the file cache (bbolt remaps as the file grows).
func TestFilterStress(t *testing.T) {
	defer index.SetFilterMinRoom(1000)()
	seedR := seedtest.Rand(t)
	d := tempDB(t)

	var mu sync.Mutex
	var applied []blobKey // every key of every object whose Apply returned
	done := make(chan struct{})
	var builds sync.Map // rooms of the filters seen

	var appliers, others sync.WaitGroup
	for w := range 2 {
		r := newRandFrom(seedR)
		appliers.Go(func() {
			for range 30 {
				o := randObject(r, blob.Tiers[r.IntN(len(blob.Tiers))], 8, 60)
				if err := d.Apply(randID(r), o); err != nil {
					t.Errorf("applier %d: %v", w, err)
					return
				}
				var keys []blobKey
				for k := range locations(o) {
					keys = append(keys, k)
				}
				// Each key of o, looked up right after its Apply returned.
				for _, k := range keys {
					if _, ok, err := d.Lookup(k.tier, k.typ, k.id); !ok || err != nil {
						t.Errorf("applier %d: %s %s %s applied but not found (%v)", w, k.tier, k.typ, k.id.Short(), err)
						return
					}
				}
				mu.Lock()
				applied = append(applied, keys...)
				mu.Unlock()
			}
		})
	}
	for g := range 4 {
		r := newRandFrom(seedR)
		others.Go(func() {
			untilClosed(done, func(i int) bool {
				if room := index.FilterRoom(d); room != 0 {
					builds.Store(room, true)
				}
				if _, ok, err := d.Lookup(blob.Tiers[r.IntN(len(blob.Tiers))], blob.Data, randID(r)); ok || err != nil {
					t.Errorf("looker %d: random id found: %v, %v", g, ok, err)
					return false
				}
				if i%8 != 0 {
					return true
				}
				mu.Lock()
				n := len(applied)
				var k blobKey
				if n > 0 {
					k = applied[r.IntN(n)]
				}
				mu.Unlock()
				if n == 0 {
					return true
				}
				if _, ok, err := d.Lookup(k.tier, k.typ, k.id); !ok || err != nil {
					t.Errorf("looker %d: %s %s %s applied but not found (%v)", g, k.tier, k.typ, k.id.Short(), err)
					return false
				}
				return true
			})
		})
	}
	others.Go(func() {
		untilClosed(done, func(i int) bool {
			if err := putFillerRecords(d, i, 32); err != nil {
				t.Error(err)
				return false
			}
			return true
		})
	})
	appliers.Wait()
	close(done)
	others.Wait()
	n := 0
	builds.Range(func(_, _ any) bool { n++; return true })
	t.Logf("%d keys applied; filters of %d different sizes seen", len(applied), n)
	if n < 2 {
		t.Errorf("filters of %d sizes seen: the filter was not rebuilt", n)
	}
	want := map[blobKey]bool{}
	for _, k := range applied {
		want[k] = true
	}
	for k := range want {
		if _, ok, err := d.Lookup(k.tier, k.typ, k.id); !ok || err != nil {
			t.Errorf("%s %s %s applied but not found (%v)", k.tier, k.typ, k.id.Short(), err)
		}
	}
}

// newRandFrom derives a generator for one goroutine from r (seeded and
// logged by newRand), so the run replays from that one seed.
func newRandFrom(r *rand.Rand) *rand.Rand { return rand.New(rand.NewPCG(r.Uint64(), r.Uint64())) }
