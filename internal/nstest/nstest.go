// Package nstest runs a test in a mount namespace of its own, and mounts
// a tmpfs for a test.
package nstest

import (
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/proctest"
)

// mountNSEnv marks a copy of a test binary started by InOwnMountNamespace;
// its value is the test the copy runs.
const mountNSEnv = "LIFEBOAT_MOUNTNS_TEST"

// InOwnMountNamespace runs t in a mount namespace of its own, so the
// mounts it makes are seen by no other process and vanish with it. In the
// test binary it was called from, it starts a copy of the binary that
// runs only t, in a new mount namespace (CLONE_NEWNS at exec, so every
// thread of the copy is in it), waits for it, passes its output on and
// fails or skips t as the copy did; it then returns false and the caller
// returns. In the copy it makes every mount private (nothing propagates
// back to the host) and returns true. Mounting needs root: t is skipped
// otherwise.
func InOwnMountNamespace(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test makes bind mounts (in a mount namespace of its own)")
	}
	if os.Getenv(mountNSEnv) == t.Name() {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Fatalf("making the test's mounts private: %v", err)
		}
		return true
	}
	proctest.RunTest(t, os.Args[0], t.Name(), []string{mountNSEnv + "=" + t.Name()}, &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS})
	return false
}
