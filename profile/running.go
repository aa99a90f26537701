package profile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrBrowserRunning: a browser is using the profile. The profile is not
// captured, since a copy taken now could be inconsistent; quit the browser
// and capture again (the condition is retryable). A paused browser still
// counts as running: its process is alive and holds its databases.
var ErrBrowserRunning = errors.New("browser running")

// RunningError names the profile in use and why it is thought to be.
type RunningError struct {
	Dir string
	Why string // e.g. "SingletonLock names process 1234 on this host, which is alive"
}

func (e *RunningError) Error() string {
	return fmt.Sprintf("%v: %s is in use (%s); quit the browser (a paused one still holds the profile), then capture again", ErrBrowserRunning, e.Dir, e.Why)
}

func (e *RunningError) Unwrap() error { return ErrBrowserRunning }

// CheckRunning returns a *RunningError when a browser is using p:
//   - Chromium: SingletonLock is a symlink to "HOST-PID"; running when
//     HOST is this host and process PID is alive. A lock of another host
//     cannot be checked from here and is taken as stale (it is never
//     captured).
//   - Firefox: in each profile folder, "lock" is a symlink to "IP:+PID"
//     (running when PID is alive here), and ".parentlock" carries a POSIX
//     record lock while Firefox runs (checked with F_OFD_GETLK).
func CheckRunning(p Profile) error {
	switch p.Kind {
	case Chromium:
		return chromiumRunning(p.Dir)
	case Firefox:
		dirs := []string{p.Dir}
		if ents, err := os.ReadDir(p.Dir); err == nil {
			for _, e := range ents {
				if e.IsDir() {
					dirs = append(dirs, filepath.Join(p.Dir, e.Name()))
				}
			}
		}
		for _, d := range dirs {
			if err := firefoxRunning(d); err != nil {
				return err
			}
		}
	}
	return nil
}

func chromiumRunning(dir string) error {
	target, err := os.Readlink(filepath.Join(dir, "SingletonLock"))
	if err != nil {
		return nil // no lock: not running
	}
	i := strings.LastIndexByte(target, '-')
	if i < 0 {
		return nil
	}
	host, pidStr := target[:i], target[i+1:]
	me, _ := os.Hostname()
	pid, err := strconv.Atoi(pidStr)
	if err != nil || host != me || !alive(pid) {
		return nil
	}
	return &RunningError{Dir: dir, Why: fmt.Sprintf("SingletonLock names process %d on this host, which is alive", pid)}
}

func firefoxRunning(dir string) error {
	if target, err := os.Readlink(filepath.Join(dir, "lock")); err == nil {
		if i := strings.LastIndex(target, ":+"); i >= 0 {
			if pid, err := strconv.Atoi(target[i+2:]); err == nil && alive(pid) {
				return &RunningError{Dir: dir, Why: fmt.Sprintf("lock names process %d, which is alive", pid)}
			}
		}
	}
	f, err := os.Open(filepath.Join(dir, ".parentlock"))
	if err != nil {
		return nil
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return nil
	}
	if lk.Type != unix.F_UNLCK {
		return &RunningError{Dir: dir, Why: ".parentlock is locked by a running process"}
	}
	return nil
}

// alive reports whether process pid exists on this host.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
