package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/internal/nstest"
)

// A disk that fills while packs are streamed to temp files: the save fails
// with ErrNoSpace naming the disk, no temp file stays behind, and every
// blob a successful Flush covered still loads after the repository is
// reopened.
func TestPackStreamDiskFull(t *testing.T) {
	mnt := nstest.Tmpfs(t, "size=3m,mode=0700")
	dir := filepath.Join(mnt, "repo")
	be, err := local.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Init(context.Background(), be, testPassword, InitOptions{PackSize: 1 << 20, KDF: testKDF()}); err != nil {
		t.Fatal(err)
	}
	tr := &testRepo{dir: dir, cache: t.TempDir(), be: be}
	r, err := Open(context.Background(), be, testPassword, Options{CacheDir: tr.cache, PackSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	blobs := randomBlobs(t, 7, 400, 64<<10)
	durable, durableData, _, saveErr := saveUntilFull(r, blobs, 20)
	if !errors.Is(saveErr, backend.ErrNoSpace) {
		t.Fatalf("saving 12 MiB into a 3 MiB disk: %v, want ErrNoSpace", saveErr)
	}
	t.Logf("full-disk error: %v", saveErr)
	if len(durable) == 0 {
		t.Fatal("not one flush fitted")
	}
	_ = r.Close(context.Background())
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Errorf("%d temp files left on the full disk", len(left))
	}
	r2 := tr.open(t, be, testPassword)
	checkAll(t, r2, blob.Workspace, durable, durableData)
	res, err := r2.Check(context.Background(), CheckOptions{ReadData: true})
	if err != nil || len(res.Problems) != 0 {
		t.Fatalf("check after a full disk: %v %+v", err, res.Problems)
	}
}
