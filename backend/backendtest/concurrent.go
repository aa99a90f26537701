package backendtest

import (
	"bytes"
	"maps"
	"sync"
	"sync/atomic"
	"testing"

	"lifeboat/backend"
)

type planned struct {
	h    backend.Handle
	data []byte
}

// testConcurrent: many goroutines save, load and list at once (run with
// -race). Every List must see each file whose Save returned before it
// began, and only complete files.
func testConcurrent(t *testing.T, b backend.Backend) {
	const workers, perWorker = 16, 8
	g := newGen(11)
	types := []backend.FileType{backend.Pack, backend.Index, backend.Snapshot, backend.Key}
	plan := make([][]planned, workers)
	size := map[backend.Handle]int64{}
	for w := range plan {
		for i := range perWorker {
			p := planned{g.handle(types[(w+i)%len(types)]), g.data(g.r.IntN(32 << 10))}
			plan[w] = append(plan[w], p)
			size[p.h] = int64(len(p.data))
		}
	}
	ctx := t.Context()
	var (
		mu   sync.Mutex
		done = map[backend.Handle]bool{}
		stop atomic.Bool
		wg   sync.WaitGroup // workers
		lwg  sync.WaitGroup // listers
	)
	for w := range workers {
		wg.Go(func() {
			for _, p := range plan[w] {
				if err := b.Save(ctx, p.h, p.data); err != nil {
					t.Errorf("Save %s: %v", p.h, err)
					return
				}
				mu.Lock()
				done[p.h] = true
				mu.Unlock()
			}
			for _, p := range plan[w] {
				got, err := b.Load(ctx, p.h, 0, 0)
				if err != nil || !bytes.Equal(got, p.data) {
					t.Errorf("Load %s: %d bytes, %v; want %d bytes", p.h, len(got), err, len(p.data))
				}
				if len(p.data) < 2 {
					continue
				}
				mid := len(p.data) / 2
				got, err = b.Load(ctx, p.h, int64(mid), len(p.data)-mid)
				if err != nil || !bytes.Equal(got, p.data[mid:]) {
					t.Errorf("ranged Load %s: %v", p.h, err)
				}
			}
		})
	}
	for _, ft := range types {
		lwg.Go(func() {
			for !stop.Load() {
				mu.Lock()
				before := maps.Clone(done)
				mu.Unlock()
				seen := map[string]bool{}
				err := b.List(ctx, ft, func(fi backend.FileInfo) error {
					h := backend.Handle{Type: ft, Name: fi.Name}
					if want, ok := size[h]; !ok || want != fi.Size {
						t.Errorf("List %s: unexpected %s size %d (planned: %v, size %d)", ft, fi.Name, fi.Size, ok, want)
					}
					seen[fi.Name] = true
					return nil
				})
				if err != nil {
					t.Errorf("List %s: %v", ft, err)
					return
				}
				for h := range before {
					if h.Type == ft && !seen[h.Name] {
						t.Errorf("List %s missed %s, saved before the listing began", ft, h.Name)
					}
				}
				if len(before) == len(size) {
					return
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	lwg.Wait()
	for _, ft := range types {
		got := listAll(t, b, ft)
		for h, n := range size {
			if h.Type == ft && got[h.Name] != n {
				t.Errorf("final List %s: %s has size %d, want %d", ft, h.Name, got[h.Name], n)
			}
		}
	}
}
