package capture

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/internal/seedtest"
	"lifeboat/repo"
	"lifeboat/snapshot/restore"
)

// A replayed index object (one a prune deleted, put back) can leave a
// blob whose only place is a pack that is gone. A capture must not trust
// that place, neither by dedup nor through the file cache's check that a
// file's chunks are indexed: it stores the chunks again, and the new
// snapshot restores.
func TestCaptureStoresAgainWhatOnlyAGonePackHeld(t *testing.T) {
	t.Parallel()
	for _, withCache := range []bool{false, true} {
		name := "dedup"
		if withCache {
			name = "file cache"
		}
		t.Run(name, func(t *testing.T) {
			tr := newCapTestRepo(t)
			src := t.TempDir()
			rng := seedtest.Rand(t)
			content := make([]byte, 300<<10)
			for i := range content {
				content[i] = byte(rng.Uint32())
			}
			if err := os.WriteFile(filepath.Join(src, "f"), content, 0o644); err != nil {
				t.Fatal(err)
			}
			capTestAge(t, src)
			o := capTestOptions(nil)
			r := tr.open(t)
			if withCache {
				o.Cache = r.FileCache()
			}
			capTestCapture(t, r, src, o)
			if err := r.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			// A prune deletes every pack, index object and snapshot...
			indexObjects := map[string][]byte{}
			ents, err := os.ReadDir(filepath.Join(tr.dir, "index"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				b, err := os.ReadFile(filepath.Join(tr.dir, "index", e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				indexObjects[e.Name()] = b
			}
			for _, d := range []string{"data", "index", "snapshots"} {
				if err := os.RemoveAll(filepath.Join(tr.dir, d)); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(filepath.Join(tr.dir, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			// ...a process syncs (its cache drops them; the file cache stays)...
			r = tr.open(t)
			if err := r.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			// ...and the index objects are put back.
			for n, b := range indexObjects {
				if err := os.WriteFile(filepath.Join(tr.dir, "index", n), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r = tr.open(t)
			if withCache {
				o.Cache = r.FileCache()
			}
			m := capTestCapture(t, r, src, o)
			if m.Totals.NewBytes == 0 {
				t.Fatalf("the capture stored nothing new: it reused blobs whose only place is a pack that is gone")
			}
			target := filepath.Join(t.TempDir(), "out")
			if _, err := restore.Run(context.Background(), r, m, restore.Options{Target: target}); err != nil {
				t.Fatalf("restoring the new snapshot: %v", err)
			}
			got, err := os.ReadFile(filepath.Join(target, "f"))
			if err != nil || !bytes.Equal(got, content) {
				t.Fatalf("restored file differs (%d bytes, %v)", len(got), err)
			}
			res, err := r.Check(context.Background(), repo.CheckOptions{ReadData: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range res.Problems {
				t.Errorf("check: %s %s: %s", p.Kind, p.Object, p.Detail)
			}
			if len(res.Notices) == 0 {
				t.Errorf("check: no index_stale notice for the replayed index objects")
			}
		})
	}
}
