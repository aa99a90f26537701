package snapshot

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"lifeboat/blob"
)

// TestRegressionGraftSubtreeBomb: a sensitive tree that lists one subtree
// twice per level expands to 2^depth entries. Like the snapshot's own
// tree, a graft is held to the totals its sensitive part declares.
func TestRegressionGraftSubtreeBomb(t *testing.T) {
	ctx := context.Background()
	r := capTestOpenRepo(t)
	src := sensTestTree(t)
	o := capTestOptions(nil)
	o.Sensitive = []SensitiveSpec{sensTestSpec()}
	m := capTestCapture(t, r, src, o)

	ids, err := SaveDir(ctx, r, blob.Sensitive, []Node{{Name: []byte("f"), Type: TypeFile, Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if ids, err = SaveDir(ctx, r, blob.Sensitive, []Node{{Name: []byte("a"), Type: TypeDir, Mode: 0o755, Subtree: ids},
			{Name: []byte("b"), Type: TypeDir, Mode: 0o755, Subtree: ids}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	part := SensitivePart{Version: SensitivePartVersion, Salt: make([]byte, 16), Trees: []SensitiveTree{{
		Path: "home/.cfg/prof", Kind: "test", Root: Node{Type: TypeDir, Mode: 0o700, Subtree: ids},
		Totals: Totals{Files: 5, Dirs: 5}, Complete: true}}}
	dst := filepath.Join(t.TempDir(), "out")
	_, err = Restore(ctx, r, m, RestoreOptions{Target: dst, Grafts: part.Grafts()})
	if !errors.Is(err, ErrUnsafeEntry) {
		t.Fatalf("a sensitive tree listing 2^12 entries under totals of 10 was restored: %v", err)
	}
}
