package proctest_test

import (
	"os"
	"testing"

	"lifeboat/internal/osutil"
	"lifeboat/internal/proctest"
)

// DeadPID names no running process, and not this one.
func TestDeadPID(t *testing.T) {
	pid := proctest.DeadPID(t)
	if pid <= 0 || pid == os.Getpid() {
		t.Fatalf("DeadPID = %d (this process is %d)", pid, os.Getpid())
	}
	if osutil.ProcessAlive(pid) {
		t.Skipf("PID %d of an exited child was reused", pid)
	}
}
