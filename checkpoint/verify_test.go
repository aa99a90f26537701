package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// Verify looks the chunks up in batches: a snapshot with more chunks than
// one batch passes, and one whose file names a chunk the index does not
// hold fails naming that file and chunk, wherever it sits among the
// batches.
func TestVerifyChunksInBatches(t *testing.T) {
	tr := newTestRepo(t)
	ctx := t.Context()
	r := tr.Repository
	var chunks []blob.ID
	for i := range verifyBatch + 100 {
		id, _, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, fmt.Appendf(nil, "chunk %d", i))
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, id)
	}
	// Files of three chunks each, 100 to a directory; a missing chunk at
	// file bad (-1: none).
	snap := func(bad int) blob.ID {
		t.Helper()
		var dirs []snapshot.Node
		for d := 0; d*300 < len(chunks); d++ {
			var files []snapshot.Node
			for f := 0; f < 100 && d*300+f*3+3 <= len(chunks); f++ {
				n := snapshot.Node{Name: fmt.Appendf(nil, "f%03d", f), Type: snapshot.TypeFile, Mode: 0o644, Size: 3}
				n.Content = chunks[d*300+f*3 : d*300+f*3+3 : d*300+f*3+3]
				if d*100+f == bad {
					n.Content = append(n.Content, blob.ID{0xba, 0xd})
				}
				files = append(files, n)
			}
			ids, err := snapshot.SaveDir(ctx, r, blob.Workspace, files)
			if err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, snapshot.Node{Name: fmt.Appendf(nil, "d%02d", d), Type: snapshot.TypeDir, Mode: 0o755, Subtree: ids})
		}
		root, err := snapshot.SaveDir(ctx, r, blob.Workspace, dirs)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		m := &snapshot.Manifest{Workspace: "w", Time: time.Now().UTC(), Paths: []string{"/w"}, Complete: true,
			Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o755, Subtree: root}}
		id, err := snapshot.SaveManifest(ctx, r, m)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	if err := Verify(ctx, r, snap(-1)); err != nil { // the trees are found, in packs or not yet
		t.Fatalf("a snapshot of %d chunks: %v", len(chunks), err)
	}
	good := snap(-1)
	// A tree that cannot be read fails the check, naming it: its pack
	// is read once as part of a run of trees, then alone.
	treeLoads := tr.fault.Add(fault.OnLoad).Match(backend.Pack).Times(2).Fail(nil)
	if err := Verify(ctx, r, good); !errors.Is(err, fault.ErrInjected) || !strings.Contains(err.Error(), "tree ") {
		t.Fatalf("verify with the tree packs unreadable: %v", err)
	}
	if treeLoads.Fired() != 2 {
		t.Fatalf("%d pack reads failed, want the run's and the root tree's alone", treeLoads.Fired())
	}
	if err := Verify(ctx, r, good); err != nil {
		t.Fatalf("verify once the packs read again: %v", err)
	}
	// A tree that is not in the index fails the check.
	m, err := snapshot.LoadManifest(ctx, r, good)
	if err != nil {
		t.Fatal(err)
	}
	m.Root.Subtree = []blob.ID{{0x7e, 0xe}}
	m.ID = blob.ID{}
	if _, err := snapshot.SaveManifest(ctx, r, m); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, r, m.ID); !errors.Is(err, repo.ErrBlobNotFound) {
		t.Fatalf("verify of a snapshot whose root tree is not indexed: %v", err)
	}
	for _, bad := range []int{0, 1000, len(chunks)/3 - 1} {
		err := Verify(ctx, r, snap(bad))
		want := fmt.Sprintf(`"/d%02d/f%03d": chunk %s is not in the index`, bad/100, bad%100, blob.ID{0xba, 0xd}.Short())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("file %d names a missing chunk: %v, want %s", bad, err, want)
		}
	}
}
