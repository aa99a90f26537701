package profile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// ErrBrowserRunning: a browser is using the profile. The profile is not
// captured, since a copy taken now could be inconsistent; quit the browser
// (or pause it with all its child processes) and capture again: the
// condition is retryable.
var ErrBrowserRunning = errors.New("browser running")

// RunningError names the profile in use and why it is thought to be.
type RunningError struct {
	Dir string
	Why string // e.g. "SingletonLock names process 1234 on this host, which is running"
	// PID is the browser process the profile's lock names, 0 when no
	// process of this host could be named (a database held by a
	// connection this host cannot see). Only such a browser can be
	// paused for a capture.
	PID int
}

func (e *RunningError) Error() string {
	advice := "quit the browser, then capture again"
	if e.PID > 0 {
		advice = fmt.Sprintf("quit the browser, or pause process %d and all its descendants (SIGSTOP the whole process tree), then capture again", e.PID)
	}
	return fmt.Sprintf("%v: %s is in use (%s); %s", ErrBrowserRunning, e.Dir, e.Why, advice)
}

func (e *RunningError) Unwrap() error { return ErrBrowserRunning }

// State is what the browser of a profile is doing, as Detect finds it.
type State int

const (
	// NotRunning: no live process of this host holds the profile. It is
	// captured after an SQLite checkpoint, without side files.
	NotRunning State = iota
	// Paused: the process the profile's lock names and all its
	// descendants are stopped (SIGSTOP, state T or t). Nothing can write
	// the profile until they are resumed, but they may hold SQLite locks,
	// so no checkpoint is run: each database is captured together with its
	// -wal and -journal, one crash-consistent unit.
	Paused
	// Running: the browser may be writing; the profile is refused.
	Running
)

func (s State) String() string {
	switch s {
	case NotRunning:
		return "not running"
	case Paused:
		return "paused"
	case Running:
		return "running"
	}
	return "unknown"
}

// Detect finds the state of p's browser:
//   - Chromium: SingletonLock is a symlink to "HOST-PID". Another host's
//     lock cannot be checked from here and is taken as stale (it is
//     never captured).
//   - Firefox: in each profile folder, "lock" is a symlink to "IP:+PID",
//     and ".parentlock" carries a POSIX record lock while Firefox runs
//     (F_OFD_GETLK names the holder's PID).
//
// A named process that is alive makes the profile Running, unless it and
// every descendant (found through the parent PIDs in /proc) is stopped:
// then it is Paused. A held .parentlock whose holder cannot be named is
// Running. The error is a *RunningError exactly when the state is Running.
//
// A paused browser must stay paused until the capture has read the
// profile: resuming it earlier lets it write into a copy in progress.
func Detect(p Profile) (State, error) {
	switch p.Kind {
	case Chromium:
		return chromiumState(p.Dir)
	case Firefox:
		dirs := []string{p.Dir}
		if ents, err := os.ReadDir(p.Dir); err == nil {
			for _, e := range ents {
				if e.IsDir() {
					dirs = append(dirs, filepath.Join(p.Dir, e.Name()))
				}
			}
		}
		st := NotRunning
		for _, d := range dirs {
			s, err := firefoxState(d)
			if err != nil {
				return s, err
			}
			st = max(st, s)
		}
		return st, nil
	}
	return NotRunning, nil
}

// CheckRunning returns a *RunningError when p's browser is running (see
// Detect); a paused browser is not refused.
func CheckRunning(p Profile) error {
	_, err := Detect(p)
	return err
}

func chromiumState(dir string) (State, error) {
	target, err := os.Readlink(filepath.Join(dir, "SingletonLock"))
	if err != nil {
		return NotRunning, nil // no lock: not running
	}
	i := strings.LastIndexByte(target, '-')
	if i < 0 {
		return NotRunning, nil
	}
	host, pidStr := target[:i], target[i+1:]
	me, _ := os.Hostname()
	pid, err := strconv.Atoi(pidStr)
	if err != nil || host != me {
		return NotRunning, nil
	}
	return lockHolder(dir, "SingletonLock names", pid)
}

func firefoxState(dir string) (State, error) {
	st := NotRunning
	if target, err := os.Readlink(filepath.Join(dir, "lock")); err == nil {
		if i := strings.LastIndex(target, ":+"); i >= 0 {
			if pid, err := strconv.Atoi(target[i+2:]); err == nil {
				s, err := lockHolder(dir, "lock names", pid)
				if err != nil {
					return s, err
				}
				st = s
			}
		}
	}
	f, err := os.Open(filepath.Join(dir, ".parentlock"))
	if err != nil {
		return st, nil
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK {
		return st, nil
	}
	if lk.Pid <= 0 { // an open-file-description lock, or a holder outside this PID namespace
		return Running, &RunningError{Dir: dir, Why: ".parentlock is locked by a process that cannot be named from here"}
	}
	s, err := lockHolder(dir, ".parentlock is locked by", int(lk.Pid))
	return max(st, s), err
}

// lockHolder classifies the process pid that a lock of dir names.
func lockHolder(dir, what string, pid int) (State, error) {
	if !osutil.ProcessAlive(pid) {
		return NotRunning, nil
	}
	if why := treeRunning(pid); why != "" {
		return Running, &RunningError{Dir: dir, Why: fmt.Sprintf("%s process %d on this host, %s", what, pid, why), PID: pid}
	}
	return Paused, nil
}
