package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"lifeboat/internal/memsample"
)

// The harness does not start the tools itself. On Linux a child's
// ru_maxrss starts from the peak RSS of the process it was forked from
// (exec records the old address space's high-water mark), and the
// harness holds the corpus's large files in memory at times: a tool of
// 20 MiB would report the harness's hundreds. So each tool is started by
// a trampoline, a fresh small process of the same binary that forks the
// tool, waits for it with wait4 and reports its rusage on fd 3.
const trampolineEnv = "LIFEBOAT_BENCH_TRAMPOLINE"

// trampolineReport is what the trampoline writes on fd 3.
type trampolineReport struct {
	Usage
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"` // the tool could not be started
}

// Trampoline runs the command in os.Args[1:] and exits, if this process
// was started as the harness's trampoline; otherwise it returns at once.
// Binaries that run the harness (lifeboat-bench, test binaries) call it first
// thing in main or TestMain.
func Trampoline() {
	if os.Getenv(trampolineEnv) != "1" {
		return
	}
	os.Exit(trampoline(os.Args[1:]))
}

func trampoline(args []string) int {
	report := os.NewFile(3, "usage report")
	if report == nil || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "bench trampoline: no report pipe or no command")
		return 2
	}
	defer report.Close()
	_ = os.Unsetenv(trampolineEnv)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// If the harness kills the trampoline (interrupt), the tool goes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var rep trampolineReport
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if cmd.ProcessState == nil {
		rep.Error = err.Error()
	} else {
		rep.ExitCode = cmd.ProcessState.ExitCode()
		if rep.Usage, err = usageOf(cmd.ProcessState, wall); err != nil {
			rep.Error = err.Error()
		}
	}
	if err := json.NewEncoder(report).Encode(rep); err != nil {
		return 2
	}
	return 0
}

// usageOf reads wait4's rusage of a finished process.
func usageOf(ps *os.ProcessState, wall time.Duration) (Usage, error) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return Usage{}, fmt.Errorf("no resource usage from wait4")
	}
	return Usage{
		Wall:   wall.Seconds(),
		User:   time.Duration(ru.Utime.Nano()).Seconds(),
		Sys:    time.Duration(ru.Stime.Nano()).Seconds(),
		MaxRSS: memsample.MaxRSS(ru),
	}, nil
}
