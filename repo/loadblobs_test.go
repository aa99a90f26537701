package repo

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
)

// packLoads is a backend that counts the reads of packs.
type packLoads struct {
	backend.Backend
	mu sync.Mutex
	n  int
}

func (b *packLoads) Load(ctx context.Context, h backend.Handle, off int64, n int) ([]byte, error) {
	if h.Type == backend.Pack {
		b.mu.Lock()
		b.n++
		b.mu.Unlock()
	}
	return b.Backend.Load(ctx, h, off, n)
}

func (b *packLoads) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// loadBlobsRepo saves n random blobs into a fresh repository (256 KiB
// packs) and opens it again through a packLoads. It returns the reopened
// repository, the counter, the ids and the blobs, and the number of packs.
func loadBlobsRepo(t *testing.T, seed uint64, n int) (*Repository, *packLoads, []blob.ID, [][]byte, int) {
	t.Helper()
	tr, r := openNewTestRepo(t)
	blobs := randomBlobs(t, seed, n, 20000)
	ids := saveAll(t, r, blob.Workspace, blobs)
	must(t, r.Close(context.Background()))
	packs := 0
	must(t, tr.be.List(context.Background(), backend.Pack, func(backend.FileInfo) error { packs++; return nil }))
	pl := &packLoads{Backend: tr.be}
	tr.cache = t.TempDir()
	return tr.open(t, pl, testPassword), pl, ids, blobs, packs
}

// loadAllBlobs calls LoadBlobs over ids and returns the indexes fn got, in
// order, failing on a blob that differs from want's.
func loadAllBlobs(t *testing.T, r *Repository, ids []blob.ID, want [][]byte) ([]int, error) {
	t.Helper()
	var got []int
	err := r.LoadBlobs(context.Background(), blob.Workspace, blob.Data, BlobsOf(ids), func(id blob.ID, plain []byte) error {
		i := len(got)
		if id != ids[i] || !bytes.Equal(plain, want[i]) {
			t.Fatalf("blob %d (%s): got %s, or its content differs", i, ids[i].Short(), id.Short())
		}
		got = append(got, i)
		return nil
	})
	return got, err
}

// Many small blobs come in order, a blob listed twice each time, in about
// a read per pack where LoadBlob takes one each; windows smaller than a
// blob still give each blob once, in order.
func TestLoadBlobsReadsPacksTogether(t *testing.T) {
	r, pl, ids, blobs, packs := loadBlobsRepo(t, 61, 400)
	ids = append(ids, ids[7], ids[3]) // listed twice (in another window when a window is a blob)
	blobs = append(blobs, blobs[7], blobs[3])
	got, err := loadAllBlobs(t, r, ids, blobs)
	must(t, err)
	if !slices.Equal(got, seq(len(ids))) {
		t.Fatalf("fn got %v", got)
	}
	if n := pl.count(); n > packs+1 {
		t.Fatalf("%d pack reads for %d blobs in %d packs", n, len(ids), packs)
	}
	t.Logf("%d blobs in %d packs: %d reads", len(ids), packs, pl.count())

	old := loadWindow
	loadWindow = 1 // a blob per window
	defer func() { loadWindow = old }()
	got, err = loadAllBlobs(t, r, ids, blobs)
	must(t, err)
	if !slices.Equal(got, seq(len(ids))) {
		t.Fatalf("with a window of one blob, fn got %v", got)
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// A blob the index does not know, and the blobs of a pack that is gone,
// are loaded alone when their turn comes: fn has every blob before the
// first of them, and the error is LoadBlob's. An error of fn ends the call
// and is returned as it is; so is one of next, after the blobs of the
// batches before it.
func TestLoadBlobsFailsInOrder(t *testing.T) {
	r, _, ids, blobs, _ := loadBlobsRepo(t, 62, 300)

	unknown := slices.Clone(ids)
	unknown[150] = blob.ID{1, 2, 3}
	got, err := loadAllBlobs(t, r, unknown, blobs)
	if !errors.Is(err, ErrBlobNotFound) || !slices.Equal(got, seq(150)) {
		t.Fatalf("an unknown blob at 150: fn got %d blobs, error %v", len(got), err)
	}

	stop := errors.New("enough")
	n := 0
	err = r.LoadBlobs(context.Background(), blob.Workspace, blob.Data, BlobsOf(ids[:100]), func(blob.ID, []byte) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	})
	if err != stop || n != 10 {
		t.Fatalf("fn's error after %d blobs: %v", n, err)
	}

	// Ids in batches, then an error: fn has the blobs of the batches.
	walkErr := errors.New("the walk failed")
	batches := 0
	var got2 []int
	err = r.LoadBlobs(context.Background(), blob.Workspace, blob.Data, func(context.Context) ([]blob.ID, error) {
		if batches == 3 {
			return nil, walkErr
		}
		batches++
		return ids[(batches-1)*37 : batches*37], nil
	}, func(id blob.ID, plain []byte) error {
		if i := len(got2); id != ids[i] || !bytes.Equal(plain, blobs[i]) {
			t.Fatalf("blob %d of the batches: got %s, or its content differs", i, id.Short())
		}
		got2 = append(got2, len(got2))
		return nil
	})
	if err != walkErr || !slices.Equal(got2, seq(3*37)) {
		t.Fatalf("3 batches, then an error: fn got %d blobs, error %v", len(got2), err)
	}

	// The pack of blob 200 goes: the first blob of that pack in ids is
	// the first that fails.
	loc, ok, err := r.LookupBlob(blob.Workspace, blob.Data, ids[200])
	if err != nil || !ok {
		t.Fatalf("lookup: %v %v", ok, err)
	}
	first := -1
	for i, id := range ids {
		if l, ok, _ := r.LookupBlob(blob.Workspace, blob.Data, id); ok && l.Pack == loc.Pack {
			first = i
			break
		}
	}
	must(t, r.be.Remove(context.Background(), backend.Handle{Type: backend.Pack, Name: loc.Pack.String()}))
	got, err = loadAllBlobs(t, r, ids, blobs)
	if !errors.Is(err, ErrPackMissing) || !slices.Equal(got, seq(first)) {
		t.Fatalf("pack of blob %d gone (its first blob %d): fn got %d blobs, error %v", 200, first, len(got), err)
	}
}

// When fn fails while the reader waits in next for more ids, LoadBlobs
// ends that wait (next's context) and returns fn's error.
func TestLoadBlobsEndsAWaitingNext(t *testing.T) {
	r, _, ids, _, _ := loadBlobsRepo(t, 63, 40)
	old := loadWindow
	loadWindow = 1 // a blob per window: fn runs while the reader fills the next
	defer func() { loadWindow = old }()
	given := false
	stop := errors.New("enough")
	n := 0
	done := make(chan error, 1)
	go func() {
		done <- r.LoadBlobs(context.Background(), blob.Workspace, blob.Data, func(ctx context.Context) ([]blob.ID, error) {
			if !given {
				given = true
				return ids[:3], nil
			}
			<-ctx.Done() // more ids only once the copy needs them, say
			return nil, ctx.Err()
		}, func(blob.ID, []byte) error {
			if n++; n == 3 {
				return stop
			}
			return nil
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a guard: it returns at once unless next is never told
		t.Fatal("LoadBlobs still waits for next a minute after fn failed")
	}
	if err != stop || n != 3 {
		t.Fatalf("fn failing at its third blob: %d blobs, error %v", n, err)
	}
}
