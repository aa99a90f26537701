package repo

import (
	"context"
	"errors"
	"testing"

	"lifeboat/blob"
)

// LookupBlobs run while the uploaded blobs it asks for are being indexed
// finds every one of them. A blob leaves the pending set once the index
// has it, so a lookup whose index transaction began before that, and that
// checks the pending set after, must look again. (Timing decides whether
// one round shows it; a round shows it about half the time without the
// second look, and the test runs up to six.)
func TestLookupBlobsWhileIndexing(t *testing.T) {
	_, r := openNewTestRepo(t) // 256 KiB packs
	ctx := context.Background()
	for round := range 6 {
		var uploaded []blob.ID
		for _, b := range randomBlobs(t, uint64(100+round), 1500, 2<<10) {
			id, _, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, b)
			must(t, err)
			uploaded = append(uploaded, id)
		}
		r.waitUploads()
		r.mu.Lock() // keep those whose pack is uploaded and not yet indexed
		n := 0
		for _, id := range uploaded {
			if p := r.pending[pendingKey{blob.Workspace, blob.Data, id}]; p != nil && p.pack != nil {
				uploaded[n] = id
				n++
			}
		}
		uploaded = uploaded[:n]
		r.mu.Unlock()
		if n == 0 {
			t.Fatal("no uploaded blob waits for its index object")
		}
		done := make(chan error, 1)
		go func() { done <- errors.Join(r.writeIndex(ctx, blob.Workspace), r.applyIndex()) }()
		calls, misses := lookupsUntil(t, r, uploaded, done, nil)
		if misses > 0 {
			t.Fatalf("round %d: in %d LookupBlobs calls while %d uploaded blobs were being indexed, %d times one was reported missing", round, calls, n, misses)
		}
	}
}
