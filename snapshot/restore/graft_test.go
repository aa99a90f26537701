package restore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/blob"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// TestGraftSubtreeBomb: a sensitive tree that lists one subtree
// twice per level expands to 2^depth entries. Like the snapshot's own
// tree, a graft is held to the totals its sensitive part declares.
func TestGraftSubtreeBomb(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := snaptest.NewRepo(t)
	m := r.Manifest(t, r.Dir(t, "", r.File(t, "readme.txt", []byte("workspace file"))), true)

	ids, err := snapshot.SaveDir(ctx, r, blob.Sensitive, []snapshot.Node{{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if ids, err = snapshot.SaveDir(ctx, r, blob.Sensitive, []snapshot.Node{{Name: []byte("a"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: ids},
			{Name: []byte("b"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: ids}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	part := snapshot.SensitivePart{Version: snapshot.SensitivePartVersion, Salt: make([]byte, 16), Trees: []snapshot.SensitiveTree{{
		Path: "home/.cfg/prof", Kind: "test", Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o700, Subtree: ids},
		Totals: snapshot.Totals{Files: 5, Dirs: 5}, Complete: true}}}
	dst := filepath.Join(t.TempDir(), "out")
	_, err = Run(ctx, r.Repository, m, Options{Target: dst, Grafts: part.Grafts()})
	if !errors.Is(err, snapshot.ErrUnsafeEntry) {
		t.Fatalf("a sensitive tree listing 2^12 entries under totals of 10 was restored: %v", err)
	}
}

// TestGraftReadOnlyParentNonRoot runs
// TestGraftReadOnlyParent as user nobody (when the tests run as
// root, which writes into read-only directories anyway).
func TestGraftReadOnlyParentNonRoot(t *testing.T) {
	t.Parallel()
	rsRunAsNobody(t, "TestGraftReadOnlyParent")
}

// TestGraftReadOnlyParent: a profile whose parent directory is
// read-only (0555) is restored as a non-root user: the graft is created
// after the workspace tree's directories got their modes, so it must not
// need write permission the parent no longer grants; the parent keeps
// its mode.
func TestGraftReadOnlyParent(t *testing.T) {
	t.Parallel()
	if os.Getenv(rsUnprivilegedEnv) == "" && os.Geteuid() == 0 {
		t.Skip("run through TestGraftReadOnlyParentNonRoot")
	}
	ctx := context.Background()
	base := rsTempDirForReadOnly(t)
	r := snaptest.NewRepo(t)
	cookie := []byte("secret-cookie-value")
	prof := rsProfileDir(t, r, "Cookies", cookie)
	cfg := r.Dir(t, ".cfg", r.File(t, "other.txt", []byte("not sensitive")))
	cfg.Mode = 0o555
	m := r.Manifest(t, r.Dir(t, "", r.File(t, "readme.txt", []byte("workspace")), r.Dir(t, "home", cfg)), true)
	grafts := []snapshot.Graft{{Path: "home/.cfg/prof", Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o700, MtimeNs: snaptest.Mtime, Subtree: prof},
		Tier: blob.Sensitive, Totals: snapshot.Totals{Files: 1, Dirs: 1}}}
	dst := filepath.Join(base, "out")
	if _, err := Run(ctx, r.Repository, m, Options{Target: dst, Grafts: grafts}); err != nil {
		t.Fatalf("restore of a profile below a read-only directory: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "home", ".cfg", "prof", "Cookies")); err != nil || string(b) != "secret-cookie-value" {
		t.Fatalf("restored profile file: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "home", ".cfg")); err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("the profile's parent: %v %v, want mode 0555", fi.Mode(), err)
	}
}
