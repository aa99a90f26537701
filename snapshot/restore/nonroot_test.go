package restore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/proctest"
	"lifeboat/snapshot/internal/snaptest"
)

// rsUnprivilegedEnv names the directory the unprivileged half works in.
const rsUnprivilegedEnv = "LIFEBOAT_TEST_UNPRIVILEGED_DIR"

// TestRestoreNonRoot runs TestRestoreUnprivileged as user nobody (when
// the tests run as root), so restore's non-root paths are tested too:
// no chown, permission denied on the target's parent, and cleanup of a
// staged tree holding read-only directories.
func TestRestoreNonRoot(t *testing.T) {
	t.Parallel()
	rsRunAsNobody(t, "TestRestoreUnprivileged")
}

// rsRunAsNobody runs the test named test as user nobody, in a fresh
// world-writable directory it passes in rsUnprivilegedEnv (TMPDIR and
// HOME too). It skips when the tests do not run as root (the named test
// then runs directly).
func rsRunAsNobody(t *testing.T, test string) {
	t.Helper()
	proctest.RunTestAsNobody(t, proctest.SharedTempDir(t, 0o777), test, rsUnprivilegedEnv)
}

// TestRestoreUnprivileged is the half TestRestoreNonRoot runs as nobody.
func TestRestoreUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Getenv(rsUnprivilegedEnv) == "" && os.Geteuid() == 0 {
		t.Skip("run through TestRestoreNonRoot")
	}
	if os.Geteuid() == 0 {
		t.Fatal("still root")
	}
	base := rsTempDirForReadOnly(t)
	src := rsMakeSource(t, base)
	r := snaptest.NewRepo(t)
	m := r.SnapshotOf(t, src)

	// A round trip without ownership changes.
	target := filepath.Join(base, "target")
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target}); err != nil {
		t.Fatal(err)
	}
	if want, got := snaptest.Dump(t, src, true), snaptest.Dump(t, target, true); want != got {
		t.Fatalf("restored tree differs\nsource:\n%s\nrestored:\n%s", want, got)
	}

	// Permission denied on the target's parent.
	locked := filepath.Join(base, "locked")
	if err := os.Mkdir(locked, 0o555); err != nil {
		t.Fatal(err)
	}
	_, err := Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(locked, "t")})
	t.Logf("error: %v", err)
	if !errors.Is(err, unix.EACCES) {
		t.Errorf("restore under a read-only parent: %v", err)
	}

	// A switch that fails after the staged tree is complete, read-only
	// directories and files included: staging is still removed.
	parent := filepath.Join(base, "p")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	old, checkOld := rsOldTarget(t, parent)
	hooks := &stageHooks{
		renameat2: func(int, string, int, string, uint) error { return unix.EIO },
		renameat:  unix.Renameat,
	}
	_, err = Run(t.Context(), r.Repository, m, Options{Target: old, Replace: true, hooks: hooks})
	if !errors.Is(err, unix.EIO) {
		t.Errorf("failed exchange: %v", err)
	}
	checkOld()
	rsNoLeftovers(t, parent)
}
