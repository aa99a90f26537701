package repo

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/busywriter"
)

// A Flush with a cancelled context must not drop open packs: after a
// retried Flush every saved blob loads.
func TestFlushCancelKeepsBlobs(t *testing.T) {
	for trial := range 20 {
		_, r := openNewTestRepo(t)
		blobs := randomBlobs(t, uint64(trial), 5, 1000)
		ids := make([]blob.ID, len(blobs))
		for i, b := range blobs {
			id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b)
			must(t, err)
			ids[i] = id
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = r.Flush(ctx)
		must(t, r.Flush(context.Background()))
		checkAll(t, r, blob.Workspace, ids, blobs)
	}
}

// A second SaveBlob of a blob another goroutine is still sealing reports it
// known only once it sits in a pack, so a Flush right after stores it.
func TestKnownOnlyOncePacked(t *testing.T) {
	_, r := openNewTestRepo(t)
	data := make([]byte, 32<<20) // big, so sealing takes a while
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	k, _ := r.TierKeys(blob.Workspace)
	key := pendingKey{blob.Workspace, blob.Data, k.BlobID(data)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, data); err != nil {
			t.Error(err)
		}
	}()
	for { // wait until the first call has claimed the blob
		r.mu.Lock()
		_, claimed := r.pending[key]
		r.mu.Unlock()
		if claimed {
			break
		}
		runtime.Gosched()
	}
	id, known, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, data)
	must(t, err)
	if known {
		must(t, r.Flush(context.Background()))
		if _, err := r.LoadBlob(context.Background(), blob.Workspace, blob.Data, id, nil); err != nil {
			t.Fatalf("reported known, flushed, yet: %v", err)
		}
	}
	wg.Wait()
}

// A caller's context that ends after SaveBlob returned does not break the
// repository for others.
func TestCallerContextDoesNotPoisonUploads(t *testing.T) {
	_, r := openNewTestRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	for _, b := range randomBlobs(t, 7, 200, 20000) {
		if _, _, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, b); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	must(t, r.Flush(context.Background()))
	if _, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, []byte("another job")); err != nil {
		t.Fatal(err)
	}
	checkRepo(t, r)
}

// Concurrent Flush calls, and Close racing saves, neither deadlock nor
// lose a blob whose SaveBlob returned.
func TestConcurrentFlushAndClose(t *testing.T) {
	for trial := range 50 {
		tr, r := openNewTestRepo(t)
		blobs := randomBlobs(t, uint64(100+trial), 20, 64<<10)
		var mu sync.Mutex
		saved := map[int]blob.ID{}
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(blobs); i += 3 {
					id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, blobs[i])
					if err != nil {
						return // ErrClosed once Close has begun
					}
					mu.Lock()
					saved[i] = id
					mu.Unlock()
				}
			}()
		}
		for range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); _ = r.Flush(context.Background()) }()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		r2 := tr.open(t, nil, testPassword)
		for i, id := range saved {
			if _, err := r2.LoadBlob(context.Background(), blob.Workspace, blob.Data, id, nil); err != nil {
				t.Fatalf("trial %d: blob %d saved before Close but lost: %v", trial, i, err)
			}
		}
	}
}

// A blob whose pack is uploaded but not yet indexed is found, at the
// right place, by LookupBlob and loaded by LoadBlob; one still in an open
// pack is reported as such.
func TestLookupUploadedBeforeIndexed(t *testing.T) {
	_, r := openNewTestRepo(t) // 256 KiB packs
	ctx := context.Background()
	blobs := randomBlobs(t, 41, 200, 16<<10)
	var ids []blob.ID
	for _, b := range blobs {
		id, _, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, b)
		must(t, err)
		ids = append(ids, id)
	}
	r.waitUploads()
	uploaded, open := 0, 0
	for i, id := range ids {
		r.mu.Lock()
		p := r.pending[pendingKey{blob.Workspace, blob.Data, id}]
		r.mu.Unlock()
		loc, ok, err := r.LookupBlob(blob.Workspace, blob.Data, id)
		switch {
		case p != nil && p.pack == nil: // in an open pack
			open++
			if ok || err == nil {
				t.Fatalf("blob %d in an open pack: LookupBlob = %v, %v", i, ok, err)
			}
		case p != nil:
			uploaded++
			if !ok || err != nil || loc.Pack != p.pack.ID || loc.ID != id {
				t.Fatalf("blob %d uploaded: LookupBlob = %+v, %v, %v", i, loc, ok, err)
			}
			got, err := r.LoadBlob(ctx, blob.Workspace, blob.Data, id, nil)
			must(t, err)
			if !bytes.Equal(got, blobs[i]) {
				t.Fatalf("blob %d: loaded bytes differ", i)
			}
		}
	}
	if uploaded == 0 || open == 0 {
		t.Fatalf("want blobs both uploaded and in open packs before Flush: %d uploaded, %d open", uploaded, open)
	}
	// LookupBlobs agrees, and fails on a blob still in an open pack.
	lookupAll := func() (found int, err error) {
		err = r.LookupBlobs(blob.Workspace, blob.Data, ids, func(i int, loc index.Location, ok bool) error {
			want, wok, werr := r.LookupBlob(blob.Workspace, blob.Data, ids[i])
			if werr != nil || ok != wok || loc != want {
				t.Fatalf("LookupBlobs of blob %d = %+v, %v; LookupBlob = %+v, %v, %v", i, loc, ok, want, wok, werr)
			}
			if ok {
				found++
			}
			return nil
		})
		return found, err
	}
	_, err := lookupAll()
	var le *LookupError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "open pack") {
		t.Fatalf("LookupBlobs with blobs in open packs: %v", err)
	}
	if p := r.pending[pendingKey{blob.Workspace, blob.Data, ids[le.Index]}]; p == nil || p.pack != nil {
		t.Errorf("LookupBlobs names blob %d, which is not in an open pack", le.Index)
	}
	must(t, r.Flush(ctx))
	for i, id := range ids {
		if _, ok, err := r.LookupBlob(blob.Workspace, blob.Data, id); !ok || err != nil {
			t.Fatalf("blob %d after Flush: %v, %v", i, ok, err)
		}
	}
	if found, err := lookupAll(); err != nil || found != len(ids) {
		t.Fatalf("LookupBlobs after Flush: %d of %d found, %v", found, len(ids), err)
	}
}

// Many savers share a set's two open packs while packs fill, are handed
// off and are flushed: every blob saved must load afterwards, and the
// repository must check clean (every pack's bytes and header match what
// was added).
func TestConcurrentSavesShareOpenPacks(t *testing.T) {
	tr := newTestRepo(t)
	r, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: tr.cache, PackSize: 64 << 10, Packers: 2, Uploads: 1})
	must(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	const savers = 8
	blobs := make([][][]byte, savers)
	ids := make([][]blob.ID, savers)
	var wg sync.WaitGroup
	for s := range savers {
		blobs[s] = randomBlobs(t, uint64(100+s), 60, 12<<10)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range blobs[s] {
				id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b)
				if err != nil {
					t.Error(err)
					return
				}
				ids[s] = append(ids[s], id)
			}
		}()
	}
	// Flushes while the savers run, taking part-filled packs.
	flusher := busywriter.Start(t, func(int) error { return r.Flush(context.Background()) })
	wg.Wait()
	flusher.Halt()
	if t.Failed() { // a save or a flush failed
		t.FailNow()
	}
	must(t, r.Flush(context.Background()))
	for s := range savers {
		checkAll(t, r, blob.Workspace, ids[s], blobs[s])
	}
	res, err := r.Check(context.Background(), CheckOptions{ReadData: true})
	must(t, err)
	if len(res.Problems) > 0 || res.Blobs < savers*60 {
		t.Fatalf("check after concurrent saves: %d blobs, problems %+v", res.Blobs, res.Problems)
	}
}

// A blob this session holds in an open pack that another process stored
// first, and that an index sync brought in since, loads from the stored
// copy: prune walks a snapshot another server stored while this server's
// capture, which saved the same tree blob again, still has it open.
func TestLookupOpenPackBlobStoredElsewhere(t *testing.T) {
	tr := newTestRepo(t)
	ctx := context.Background()
	r1 := tr.open(t, nil, testPassword)
	r2 := tr.open(t, nil, testPassword)
	data := []byte("a tree blob two servers saved")
	id, _, err := r2.SaveBlob(ctx, blob.Workspace, blob.Tree, data)
	must(t, err)
	must(t, r2.Flush(ctx))
	if _, _, err := r1.SaveBlob(ctx, blob.Workspace, blob.Tree, data); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r1.LookupBlob(blob.Workspace, blob.Tree, id); err == nil || !strings.Contains(err.Error(), "open pack") {
		t.Fatalf("before the index sync: LookupBlob = %v, want the open-pack error", err)
	}
	if _, err := r1.SyncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := r1.LoadBlob(ctx, blob.Workspace, blob.Tree, id, nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after the index sync: LoadBlob = %q, %v", got, err)
	}
	must(t, r1.Flush(ctx))
}
