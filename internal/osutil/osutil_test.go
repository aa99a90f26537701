package osutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"lifeboat/internal/proctest"

	"golang.org/x/sys/unix"
)

func TestIgnoringEINTRRetriesOnlyEINTR(t *testing.T) {
	t.Parallel()
	calls := 0
	err := IgnoringEINTR(func() error {
		calls++
		if calls < 3 {
			return syscall.EINTR
		}
		return syscall.EIO
	})
	if err != syscall.EIO || calls != 3 {
		t.Fatalf("err %v after %d calls, want EIO after 3", err, calls)
	}
	calls = 0
	n, err := IgnoringEINTR2(func() (int, error) {
		calls++
		if calls == 1 {
			return -1, syscall.EINTR
		}
		return 7, nil
	})
	if n != 7 || err != nil || calls != 2 {
		t.Fatalf("got %d, %v after %d calls, want 7, nil after 2", n, err, calls)
	}
}

// A second open file description cannot take a lock the first holds, and
// can once it is released.
func TestFlockFileExcludesAnotherOpen(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "lock")
	a, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := FlockFile(a, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := FlockFile(b, unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("second lock: %v, want EWOULDBLOCK", err)
	}
	if err := Flock(int(a.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := FlockFile(b, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("lock after release: %v", err)
	}
}

func TestProcessAlive(t *testing.T) {
	if !ProcessAlive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	if ProcessAlive(0) || ProcessAlive(-1) {
		t.Fatal("PID 0 or -1 alive")
	}
	if pid := proctest.DeadPID(t); ProcessAlive(pid) {
		t.Skipf("PID %d of an exited child was reused", pid)
	}
}

// UnixMode and FileMode are each other's inverse over every permission,
// setuid, setgid and sticky combination, and FileMode drops type bits.
func TestModeRoundTrip(t *testing.T) {
	t.Parallel()
	for v := uint32(0); v <= 0o7777; v++ {
		if got := UnixMode(FileMode(v)); got != v {
			t.Fatalf("UnixMode(FileMode(%04o)) = %04o", v, got)
		}
	}
	if got := FileMode(0o104755); got != fs.ModeSetuid|0o755 {
		t.Fatalf("FileMode of a setuid regular file's st_mode: %v", got)
	}
}
