package capture

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/internal/proctest"
	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// Root reads files of mode 000, so as root the unreadable-file case runs
// the capture in a copy of this test binary started as user 65534
// (TestCaptureUnreadableChild), and checks its snapshot here.

const capChildEnv = "LIFEBOAT_CAPTURE_CHILD"

func TestCaptureUnreadableAsNobody(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("not root: TestCaptureUnreadable covers this")
	}
	base := proctest.SharedTempDir(t, 0o755)
	be, _ := repotest.Init(t, repotest.Options{Store: storetest.Store{Kind: "local", Location: filepath.Join(base, "repo")}, Init: repo.InitOptions{PackSize: repo.DefaultPackSize}})
	tree := filepath.Join(base, "tree")
	capTestWrite(t, tree, map[string]string{"ok": "fine", "secret": "no", "locked/inside": "hidden"})
	if err := os.MkdirAll(filepath.Join(base, "cache"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(base, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"secret", "locked"} {
		if err := os.Chmod(filepath.Join(tree, p), 0); err != nil {
			t.Fatal(err)
		}
	}
	proctest.RunTestAsNobody(t, base, "TestCaptureUnreadableChild", capChildEnv)
	idHex, err := os.ReadFile(filepath.Join(base, "snapshot-id"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := blob.ParseID(string(idHex))
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(context.Background(), be, repotest.Password, repo.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	m, err := snapshot.LoadManifest(context.Background(), r, id)
	if err != nil {
		t.Fatal(err)
	}
	capTestCheckUnreadable(t, r, m)
	snaptest.Check(t, r)
}

// TestCaptureUnreadableChild is the child of TestCaptureUnreadableAsNobody.
func TestCaptureUnreadableChild(t *testing.T) {
	t.Parallel()
	base := proctest.ChildEnv(t, capChildEnv, "TestCaptureUnreadableAsNobody")
	be, err := local.Open(filepath.Join(base, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(context.Background(), be, repotest.Password, repo.Options{CacheDir: filepath.Join(base, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Run(context.Background(), r, filepath.Join(base, "tree"), capTestOptions(nil))
	if cerr := r.Close(context.Background()); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("errors: %v", m.Errors)
	if err := os.WriteFile(filepath.Join(base, "snapshot-id"), []byte(m.ID.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
