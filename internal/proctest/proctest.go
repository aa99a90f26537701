// Package proctest is test support for tests that start processes: a
// child run of this test binary (as user nobody, too), the lifeboat
// command built for a test, and DeadPID, the id of a process that surely
// does not run.
package proctest

import (
	"os/exec"
	"testing"
)

// DeadPID returns the process id of a child that has run and exited
// (Run reaped it): no process of this host runs under it until the id
// is reused, which a test machine's PID space makes vanishingly rare.
func DeadPID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}
