package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/bench"
)

// Usage is what one child process cost, from wait4's rusage: every tool,
// Lifeboat included, is measured the same way (through the trampoline).
type Usage struct {
	Wall   float64 `json:"wall_seconds"`
	User   float64 `json:"user_seconds"`
	Sys    float64 `json:"sys_seconds"`
	MaxRSS int64   `json:"max_rss_bytes"` // peak resident set of the child
}

// CPU is user plus system time.
func (u Usage) CPU() float64 { return u.User + u.Sys }

// command is one child process to run.
type command struct {
	path string
	args []string
	dir  string   // working directory; "" for the harness's
	env  []string // added to the harness's environment
}

func (c command) String() string { return c.path + " " + strings.Join(c.args, " ") }

// measure runs c through the trampoline binary self (see Trampoline),
// its output going to the file log, and returns its usage. A non-zero
// exit is an error that names the command and the log. The command's
// working directory is made first if it is missing.
func measure(ctx context.Context, self string, c command, log string) (Usage, error) {
	if c.dir != "" {
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return Usage{}, err
		}
	}
	out, err := os.Create(log)
	if err != nil {
		return Usage{}, err
	}
	defer out.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return Usage{}, err
	}
	defer pr.Close()
	cmd := exec.CommandContext(ctx, self, append([]string{c.path}, c.args...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = c.dir, out, out
	cmd.Env = append(append(os.Environ(), c.env...), trampolineEnv+"=1")
	cmd.ExtraFiles = []*os.File{pw}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return Usage{}, fmt.Errorf("start the trampoline %s: %w", self, err)
	}
	var rep trampolineReport
	derr := json.NewDecoder(pr).Decode(&rep)
	if err := cmd.Wait(); err != nil {
		return Usage{}, fmt.Errorf("%s: trampoline %s: %w (output in %s)", c, self, err, log)
	}
	switch {
	case derr != nil:
		return Usage{}, fmt.Errorf("%s: no usage report from the trampoline %s (does it call harness.Trampoline?): %w", c, self, derr)
	case rep.Error != "":
		return Usage{}, fmt.Errorf("%s: %s (output in %s)", c, rep.Error, log)
	case rep.ExitCode != 0:
		return Usage{}, fmt.Errorf("%s: exit status %d (output in %s)", c, rep.ExitCode, log)
	}
	return rep.Usage, nil
}

// warm reads every regular file under dir, so each tool starts a step
// with the same warm page cache. A dir that does not exist (a cache a
// tool has not made) has nothing to warm.
func warm(dir string) error {
	buf := make([]byte, 1<<20)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil && p == dir && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		for {
			if _, err := f.Read(buf); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
		}
	})
}

// syncFS flushes the file system that holds dir and says how long it
// took: after a restore, what a tool left unwritten is paid here.
func syncFS(dir string) (float64, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := time.Now()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return 0, fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return time.Since(start).Seconds(), nil
}

// duBytes is the apparent size of the files under dir (du -sb).
func duBytes(dir string) (int64, error) {
	s, err := bench.Stat(dir)
	return s.Bytes, err
}
