package repo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/blob"
)

// Streamed packs buffer their writes, so a full disk shows at a later
// SaveBlob (pack larger than the buffer) or only when the pack is
// finished in its upload (pack smaller): either way the error carries
// ErrNoSpace, the repository takes later saves (they fail only when their
// own pack meets the full disk, at Close here), no temp file stays, and
// after reopening every blob a successful Flush covered loads while no
// blob of a lost pack is indexed (check --read-data is clean).
func TestPackStreamWriteFails(t *testing.T) {
	for _, tc := range []struct {
		name     string
		packSize int
		budget   int64
		batch    int  // blobs saved between flushes
		atAdd    bool // the error shows at a SaveBlob, not at Flush
	}{
		{"at finish", 256 << 10, 600 << 10, 10, false}, // a pack never outgrows the buffer
		{"at add", 1 << 20, 600 << 10, 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRepo(t)
			fb := &fault.TempFull{TempBackend: tr.be.(*local.Backend)}
			fb.Budget.Store(tc.budget)
			r, err := Open(context.Background(), fb, testPassword, Options{CacheDir: tr.cache, PackSize: tc.packSize, Packers: 1})
			if err != nil {
				t.Fatal(err)
			}
			blobs := randomBlobs(t, 51, 300, 16<<10)
			durable, durableData, atAdd, saveErr := saveUntilFull(r, blobs, tc.batch)
			if !errors.Is(saveErr, backend.ErrNoSpace) {
				t.Fatalf("saving past the budget: %v, want ErrNoSpace", saveErr)
			}
			t.Logf("error: %v", saveErr)
			if atAdd != tc.atAdd {
				t.Fatalf("the error showed at SaveBlob: %v, want %v", atAdd, tc.atAdd)
			}
			if len(durable) == 0 {
				t.Fatal("not one flush fitted")
			}
			if _, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, []byte("after the failure")); err != nil {
				t.Fatalf("save after a lost pack: %v, want it taken (a lost pack does not stop the repository)", err)
			}
			if err := r.Close(context.Background()); !errors.Is(err, backend.ErrNoSpace) {
				t.Fatalf("close with a pack to store on the full disk: %v, want ErrNoSpace", err)
			}
			if left, _ := os.ReadDir(filepath.Join(tr.dir, "tmp")); len(left) != 0 {
				t.Fatalf("%d temp files left", len(left))
			}
			r2 := tr.open(t, nil, testPassword)
			checkAll(t, r2, blob.Workspace, durable, durableData)
			k, err := r2.TierKeys(blob.Workspace)
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range blobs {
				got, err := r2.LoadBlob(context.Background(), blob.Workspace, blob.Data, k.BlobID(b), nil)
				if err != nil && !errors.Is(err, ErrBlobNotFound) || err == nil && !bytes.Equal(got, b) {
					t.Fatalf("blob %d after reopening: %v", i, err)
				}
			}
			checkRepo(t, r2)
		})
	}
}
