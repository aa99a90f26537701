package capture

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"lifeboat/backend/local"
	"lifeboat/blob"
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
	base, err := os.MkdirTemp("", "lifeboat-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	be, _ := repotest.Init(t, repotest.Options{Store: storetest.Store{Kind: "local", Location: filepath.Join(base, "repo")}, Init: repo.InitOptions{PackSize: repo.DefaultPackSize}})
	tree := filepath.Join(base, "tree")
	capTestWrite(t, tree, map[string]string{"ok": "fine", "secret": "no", "locked/inside": "hidden"})
	if err := os.MkdirAll(filepath.Join(base, "cache"), 0o700); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "snapshot.test")
	snaptest.CopyTestBinary(t, bin)
	err = filepath.WalkDir(base, func(p string, _ os.DirEntry, err error) error {
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
	cmd := exec.Command(bin, "-test.run=^TestCaptureUnreadableChild$", "-test.v")
	cmd.Env = append(os.Environ(), capChildEnv+"="+base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestCaptureUnreadableChild") {
		t.Fatalf("child as user 65534: %v\n%s", err, out)
	}
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
	base := snaptest.ChildEnv(t, capChildEnv, "TestCaptureUnreadableAsNobody")
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
