package repo

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/blob"
)

// failFirstTemp is a local backend whose next CreateTemp fails when fail
// is set: the pack a SaveBlob would start cannot be, and that save fails
// without making the repository unusable.
type failFirstTemp struct {
	*local.Backend
	fail atomic.Bool
}

var errNoTemp = errors.New("no temp file for you")

func (b *failFirstTemp) CreateTemp() (backend.TempFile, error) {
	if b.fail.CompareAndSwap(true, false) {
		return nil, errNoTemp
	}
	return b.Backend.CreateTemp()
}

type saveResult struct {
	known bool
	err   error
}

// TestSaveBlobWaiters has a first SaveBlob of a blob held before it seals
// (every sealing slot taken) while a second SaveBlob of the same blob
// waits for it: the waiter learns the outcome of the first only once that
// is settled, saves the blob itself when the first failed, and gives up
// when its own context ends, leaving the first to finish.
func TestSaveBlobWaiters(t *testing.T) {
	data := bytes.Repeat([]byte("the same blob, saved twice at once "), 100)
	for _, tc := range []struct {
		name        string
		failFirst   bool // the first save cannot start a pack
		cancelWaits bool // the waiter's context ends while it waits
	}{
		{"first save succeeds", false, false},
		{"first save fails", true, false},
		{"waiter cancelled", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRepo(t)
			fb := &failFirstTemp{Backend: tr.be.(*local.Backend)}
			fb.fail.Store(tc.failFirst)
			r := tr.open(t, fb, testPassword)
			k, err := r.TierKeys(blob.Workspace)
			must(t, err)
			key := pendingKey{blob.Workspace, blob.Data, k.BlobID(data)}
			state := func() (claimed, waited bool) {
				r.mu.Lock()
				defer r.mu.Unlock()
				p := r.pending[key]
				return p != nil, p != nil && p.ready != nil
			}
			waitUntil := func(cond func() bool) {
				for !cond() {
					runtime.Gosched()
				}
			}
			for range cap(r.seals) { // hold every sealing slot
				r.seals <- struct{}{}
			}
			held := true
			release := func() {
				if held {
					held = false
					for range cap(r.seals) {
						<-r.seals
					}
				}
			}
			t.Cleanup(release) // before Close, which waits for the first save
			save := func(ctx context.Context) <-chan saveResult {
				ch := make(chan saveResult, 1)
				go func() {
					_, known, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, data)
					ch <- saveResult{known, err}
				}()
				return ch
			}
			first := save(context.Background())
			waitUntil(func() bool { c, _ := state(); return c })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			second := save(ctx)
			waitUntil(func() bool {
				select {
				case res := <-second:
					t.Fatalf("the second save returned %+v while the first still held the blob", res)
				default:
				}
				_, w := state()
				return w
			})
			if tc.cancelWaits {
				cancel()
				if res := <-second; res.known || !errors.Is(res.err, context.Canceled) {
					t.Fatalf("cancelled waiter: %+v, want context.Canceled", res)
				}
			}
			release() // let the first save go on
			res1 := <-first
			switch {
			case tc.failFirst && !errors.Is(res1.err, errNoTemp):
				t.Fatalf("first save: %+v, want %v", res1, errNoTemp)
			case !tc.failFirst && (res1.err != nil || res1.known):
				t.Fatalf("first save: %+v, want a new blob", res1)
			}
			if !tc.cancelWaits {
				// Known when the first saved it; saved anew by the
				// waiter itself when the first failed.
				if res2 := <-second; res2.err != nil || res2.known == tc.failFirst {
					t.Fatalf("second save: %+v, want known %v", res2, !tc.failFirst)
				}
			}
			if claimed, _ := state(); !claimed {
				t.Fatal("the blob is not pending after it was saved")
			}
			if _, known, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, data); err != nil || !known {
				t.Fatalf("a third save: known %v, %v; want known", known, err)
			}
			must(t, r.Flush(context.Background()))
			got, err := r.LoadBlob(context.Background(), blob.Workspace, blob.Data, key.id, nil)
			must(t, err)
			if !bytes.Equal(got, data) {
				t.Fatal("loaded bytes differ")
			}
			checkRepo(t, r)
		})
	}
}
