package s3test

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the server when the test process dies, so a test
// binary killed by a timeout leaves no server behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
