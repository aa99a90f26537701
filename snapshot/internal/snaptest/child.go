package snaptest

import (
	"io"
	"os"
	"os/exec"
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

// CopyTestBinary copies this test binary to the new executable file dst,
// for a child run as another user that may not read the original.
func CopyTestBinary(t testing.TB, dst string) {
	t.Helper()
	in, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
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
