package proctest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ChildEnv returns what a parent test passed to this child test in the
// environment variable env; it skips the test when run on its own.
func ChildEnv(t testing.TB, env, parent string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skip("runs only as the child of " + parent)
	}
	return v
}

// StartChild starts cmd (a child run of this test binary) with its
// stderr on the test's and returns its stdout.
func StartChild(t testing.TB, cmd *exec.Cmd) io.Reader {
	t.Helper()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RunTest runs the test named test in bin (this test binary or a copy of
// it) with the environment variables env added and attr, logs its output,
// and fails or skips t as that run did.
func RunTest(t testing.TB, bin, test string, env []string, attr *syscall.SysProcAttr) {
	t.Helper()
	cmd := exec.Command(bin, "-test.run", "^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	t.Logf("child run of %s:\n%s", test, out)
	switch {
	case err != nil:
		t.Fatalf("the child run of %s failed: %v", test, err)
	case strings.Contains(string(out), "--- SKIP: "+test):
		t.Skip("the child run skipped")
	case !strings.Contains(string(out), "--- PASS: "+test):
		t.Fatalf("the child did not run %s", test)
	}
}

// AsNobody starts a process as user and group nobody (65534), without
// supplementary groups.
func AsNobody() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// RunTestAsNobody runs the test named test as user nobody in a copy of
// this test binary (which nobody may not read) placed in dir; dir is
// also passed in the environment variable env and as TMPDIR and HOME. It
// fails or skips t as that run did, and skips t when this process is not
// root (so cannot start one as nobody).
func RunTestAsNobody(t testing.TB, dir, test, env string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("not root: cannot run %s as user nobody (it runs directly)", test)
	}
	bin := filepath.Join(dir, "child.test")
	CopyExecutable(t, os.Args[0], bin)
	RunTest(t, bin, test, []string{env + "=" + dir, "TMPDIR=" + dir, "HOME=" + dir}, AsNobody())
}

// SharedTempDir makes a new directory of mode perm in the system's temp
// directory, removed when the test ends: unlike t.TempDir, whose parent
// only its owner may enter, another user may reach it.
func SharedTempDir(t testing.TB, perm os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lifeboat-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CopyExecutable copies the executable file from to the new executable
// file to.
func CopyExecutable(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
