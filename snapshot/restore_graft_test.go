package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/blob"
)

// TestGraftSubtreeBomb: a sensitive tree that lists one subtree
// twice per level expands to 2^depth entries. Like the snapshot's own
// tree, a graft is held to the totals its sensitive part declares.
func TestGraftSubtreeBomb(t *testing.T) {
	ctx := context.Background()
	r := newRestoreRepo(t)
	m := r.manifest(t, r.dir(t, "", r.file(t, "readme.txt", []byte("workspace file"))), true)

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
	_, err = Restore(ctx, r.Repository, m, RestoreOptions{Target: dst, Grafts: part.Grafts()})
	if !errors.Is(err, ErrUnsafeEntry) {
		t.Fatalf("a sensitive tree listing 2^12 entries under totals of 10 was restored: %v", err)
	}
}

// TestGraftReadOnlyParentNonRoot runs
// TestGraftReadOnlyParent as user nobody (when the tests run as
// root, which writes into read-only directories anyway).
func TestGraftReadOnlyParentNonRoot(t *testing.T) {
	rsRunAsNobody(t, "TestGraftReadOnlyParent")
}

// TestGraftReadOnlyParent: a profile whose parent directory is
// read-only (0555) is restored as a non-root user: the graft is created
// after the workspace tree's directories got their modes, so it must not
// need write permission the parent no longer grants; the parent keeps
// its mode.
func TestGraftReadOnlyParent(t *testing.T) {
	if os.Getenv(rsUnprivilegedEnv) == "" && os.Geteuid() == 0 {
		t.Skip("run through TestGraftReadOnlyParentNonRoot")
	}
	ctx := context.Background()
	base := t.TempDir()
	t.Cleanup(func() { // read-only directories would stop t.TempDir's removal
		_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if d != nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
	})
	r := newRestoreRepo(t)
	cookie := []byte("secret-cookie-value")
	id, _, err := r.SaveBlob(ctx, blob.Sensitive, blob.Data, cookie)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := SaveDir(ctx, r, blob.Sensitive, []Node{{Name: []byte("Cookies"), Type: TypeFile, Mode: 0o600, MtimeNs: rsTestTime, Size: uint64(len(cookie)), Content: []blob.ID{id}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.dir(t, ".cfg", r.file(t, "other.txt", []byte("not sensitive")))
	cfg.Mode = 0o555
	m := r.manifest(t, r.dir(t, "", r.file(t, "readme.txt", []byte("workspace")), r.dir(t, "home", cfg)), true)
	grafts := []Graft{{Path: "home/.cfg/prof", Root: Node{Type: TypeDir, Mode: 0o700, MtimeNs: rsTestTime, Subtree: prof},
		Tier: blob.Sensitive, Totals: Totals{Files: 1, Dirs: 1}}}
	dst := filepath.Join(base, "out")
	if _, err := Restore(ctx, r.Repository, m, RestoreOptions{Target: dst, Grafts: grafts}); err != nil {
		t.Fatalf("restore of a profile below a read-only directory: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "home", ".cfg", "prof", "Cookies")); err != nil || string(b) != "secret-cookie-value" {
		t.Fatalf("restored profile file: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "home", ".cfg")); err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("the profile's parent: %v %v, want mode 0555", fi.Mode(), err)
	}
}
