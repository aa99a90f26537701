package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/internal/repotest"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// A capture that fails once its files are read, at its final flush (an
// index object cannot be saved) or at its manifest, writes no file cache
// entry (they are sealed beside the flush but written only after the
// manifest), and the next capture, which succeeds, reads every file again
// and caches them all.
func TestFailedCaptureWritesNoFileCache(t *testing.T) {
	t.Parallel()
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
			r := capTestOpenBackend(t, fb, repotest.Password, tr.cache)
			o, read := capTestCacheOptions(r)
			fb.Add(fault.OnSave).Match(failing)
			if _, err := Run(context.Background(), r, root, o); !errors.Is(err, fault.ErrInjected) {
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
			if n := capTestCached(t, r, o.Workspace, files); n != len(files) {
				t.Errorf("file cache holds entries for %d files, want %d", n, len(files))
			}
			capTestCompare(t, r, root, m)
			snaptest.Check(t, r)
		})
	}
}

// The sensitive part is stored and indexed before the manifest that names
// it: a copy of the repository taken when the workspace capture's flush
// returned (the manifest is saved next) holds no manifest yet but loads the
// part and every sensitive tree, though no flush follows the part's save.
func TestSensitivePartStoredBeforeManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr, r, src, o := sensTestSetup(t)
	copyAt := filepath.Join(t.TempDir(), "copy")
	o.hooks.flushed = func() { // after each sensitive tree's flush, and the workspace's last
		if err := os.RemoveAll(copyAt); err != nil {
			t.Fatal(err)
		}
		err := filepath.WalkDir(tr.dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(tr.dir, p)
			to := filepath.Join(copyAt, rel)
			if d.IsDir() {
				return os.MkdirAll(to, 0o700)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o600)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	m := capTestCapture(t, r, src, o)
	if m.Sensitive == nil {
		t.Fatal("no sensitive part")
	}
	if left, _ := os.ReadDir(filepath.Join(copyAt, string(backend.Snapshot))); len(left) != 0 {
		t.Fatalf("the copy taken before the manifest holds snapshots/%s", left[0].Name())
	}
	be, err := local.Open(copyAt)
	if err != nil {
		t.Fatal(err)
	}
	r2 := capTestOpenBackend(t, be, repotest.Password, t.TempDir())
	part, err := snapshot.LoadSensitivePart(ctx, r2, m)
	if err != nil {
		t.Fatalf("the part was not stored and indexed when the flush returned: %v", err)
	}
	files := 0
	var walk func(ids []blob.ID)
	walk = func(ids []blob.ID) {
		err := snapshot.LoadDir(ctx, r2, blob.Sensitive, ids, func(n *snapshot.Node) error {
			for _, c := range n.Content {
				if _, err := r2.LoadBlob(ctx, blob.Sensitive, blob.Data, c, nil); err != nil {
					return err
				}
			}
			if n.Type == snapshot.TypeFile {
				files++
			}
			walk(n.Subtree)
			return nil
		})
		if err != nil {
			t.Fatalf("a sensitive tree in the copy: %v", err)
		}
	}
	for _, tree := range part.Trees {
		walk(tree.Root.Subtree)
	}
	if files == 0 {
		t.Fatal("no sensitive file found")
	}
}
