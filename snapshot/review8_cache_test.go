package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/repo"
)

// A capture that fails once its files are read, at its final flush (an
// index object cannot be saved) or at its manifest, writes no file cache
// entry (they are sealed beside the flush but written only after the
// manifest), and the next capture, which succeeds, reads every file again
// and caches them all.
func TestFailedCaptureWritesNoFileCache(t *testing.T) {
	for _, failing := range []backend.FileType{backend.Index, backend.Snapshot} {
		t.Run(string(failing), func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{}
			var total int64
			for i := range 40 {
				c := fmt.Sprintf("file %d of the failed capture\n", i)
				files[fmt.Sprintf("d%d/f%d", i%4, i)] = c
				total += int64(len(c))
			}
			capTestWrite(t, root, files)
			tr := newCapTestRepo(t)
			inner, err := local.Open(tr.dir)
			if err != nil {
				t.Fatal(err)
			}
			fb := fault.Wrap(inner)
			r, err := repo.Open(context.Background(), fb, capTestPassword, repo.Options{CacheDir: tr.cache})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			var read atomic.Int64
			o := capTestOptions(&read)
			o.Cache = r.Index()
			fb.Add(fault.OnSave).Match(failing)
			if _, err := Capture(context.Background(), r, root, o); !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("capture with a failing %s save: %v", failing, err)
			}
			fb.VerifyAllFired(t)
			ws := capTestWsKey(t, r, o.Workspace)
			if n, err := r.Index().FileCacheCount(ws); err != nil || n != 0 {
				t.Fatalf("the failed capture left %d file cache entries (%v)", n, err)
			}
			read.Store(0)
			m := capTestCapture(t, r, root, o)
			if read.Load() != total {
				t.Errorf("the capture after the failed one read %d bytes, want %d", read.Load(), total)
			}
			if n, err := r.Index().FileCacheCount(ws); err != nil || n != len(files) {
				t.Errorf("file cache holds %d entries (%v), want %d", n, err, len(files))
			}
			capTestCompare(t, r, root, m)
			capTestCheck(t, r)
		})
	}
}
