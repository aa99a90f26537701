//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package dirlock

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lifeboat/internal/clocktest"
)

func TestMain(m *testing.M) {
	if os.Getenv("DIRLOCK_TEST_CHILD") == "1" {
		os.Exit(childMain(os.Stdin, os.Stdout, os.Getenv("DIRLOCK_TEST_STATE")))
	}
	os.Exit(m.Run())
}

// fakeClock is the shared fake clock: these tests also run child
// processes, which a testing/synctest bubble does not allow.
type fakeClock = clocktest.Fake

func newFakeClock() *fakeClock { return clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// instantClock fires every wait at once, moving its time forward by it:
// a contender spins through its backoff schedule in fake time.
type instantClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *instantClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *instantClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	c.mu.Unlock()
	runtime.Gosched()
	return ch
}

// childMain is the re-executed test binary: it takes and releases locks
// under stateRoot as told, one command per line, one reply per line.
//
//	lock <target> <purpose>  -> "locked <inode>" | "busy <holder pid>" | "error <msg>"
//	unlock                   -> "unlocked"
func childMain(in io.Reader, out io.Writer, stateRoot string) int {
	l, err := New(stateRoot, Options{Wait: -1})
	if err != nil {
		fmt.Fprintf(out, "error %v\n", err)
		return 1
	}
	fmt.Fprintf(out, "ready %d\n", os.Getpid())
	var lk *Lock
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "lock":
			k, err := l.TryLock(f[1], f[2])
			if be, ok := err.(*BusyError); ok {
				fmt.Fprintf(out, "busy %d\n", be.Holder.PID)
				continue
			}
			if err != nil {
				fmt.Fprintf(out, "error %v\n", err)
				continue
			}
			lk = k
			fi, _ := os.Stat(k.LockFile())
			fmt.Fprintf(out, "locked %d\n", fi.Sys().(*syscall.Stat_t).Ino)
		case len(f) == 1 && f[0] == "unlock" && lk != nil:
			if err := lk.Unlock(); err != nil {
				fmt.Fprintf(out, "error %v\n", err)
				continue
			}
			lk = nil
			fmt.Fprintln(out, "unlocked")
		default:
			fmt.Fprintf(out, "error bad command %q\n", sc.Text())
		}
	}
	return 0
}

// child is a re-executed test binary driven over pipes.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	pid int
}

func startChild(t *testing.T, stateRoot string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DIRLOCK_TEST_CHILD=1", "DIRLOCK_TEST_STATE="+stateRoot,
		"GORACE=atexit_sleep_ms=0") // a race build otherwise lingers 1s at exit
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		c.in.Close()
		_ = c.cmd.Wait()
	})
	if _, err := fmt.Sscanf(c.read(t), "ready %d", &c.pid); err != nil {
		t.Fatalf("child did not start: %v", err)
	}
	return c
}

// startHolder starts a child that takes target's lock for a restore.
func startHolder(t *testing.T, stateRoot, target string) *child {
	t.Helper()
	c := startChild(t, stateRoot)
	if r := c.do(t, "lock %s restore", target); !strings.HasPrefix(r, "locked ") {
		t.Fatalf("child: %s", r)
	}
	return c
}

func (c *child) read(t *testing.T) string {
	t.Helper()
	if !c.out.Scan() {
		t.Fatalf("child %d: no reply (%v)", c.pid, c.out.Err())
	}
	return c.out.Text()
}

// do sends one command and returns the child's reply.
func (c *child) do(t *testing.T, format string, a ...any) string {
	t.Helper()
	if _, err := fmt.Fprintf(c.in, format+"\n", a...); err != nil {
		t.Fatalf("child %d: %v", c.pid, err)
	}
	return c.read(t)
}

// kill9 kills the child with SIGKILL and reaps it: once Wait returns, the
// kernel has closed its files and so released its flocks.
func (c *child) kill9(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// drive advances clk by every wait it is asked for until done delivers.
func drive[T any](clk *fakeClock, done <-chan T) T {
	for {
		select {
		case d := <-clk.Waits():
			clk.Advance(d)
		case v := <-done:
			return v
		}
	}
}

type lockResult struct {
	lk  *Lock
	err error
}
