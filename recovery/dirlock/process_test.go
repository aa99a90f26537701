//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newLocker returns a Locker on a fresh state root and a fresh target dir.
func newLocker(t *testing.T, o Options) (l *Locker, stateRoot, work string) {
	t.Helper()
	stateRoot, work = t.TempDir(), t.TempDir()
	l, err := New(stateRoot, o)
	if err != nil {
		t.Fatal(err)
	}
	return l, stateRoot, work
}

func mustTry(t *testing.T, l *Locker, target, purpose string) *Lock {
	t.Helper()
	k, err := l.TryLock(target, purpose)
	if err != nil {
		t.Fatalf("TryLock %s: %v", target, err)
	}
	return k
}

func wantBusy(t *testing.T, err error, holderPID int) *BusyError {
	t.Helper()
	var be *BusyError
	if !errors.As(err, &be) || !errors.Is(err, ErrBusy) {
		t.Fatalf("want a *BusyError, got %v", err)
	}
	if !be.HolderKnown || be.Holder.PID != holderPID {
		t.Fatalf("busy error names holder %+v (known %v), want PID %d: %v", be.Holder, be.HolderKnown, holderPID, err)
	}
	return be
}

// Another process holds the lock: this one is refused with the holder's
// PID, host and purpose, gets an independent target at once, and gets the
// lock when the other lets go; then the other is refused in turn.
func TestCrossProcessContention(t *testing.T) {
	l, state, work := newLocker(t, Options{Wait: -1})
	target, other := filepath.Join(work, "ws"), filepath.Join(work, "other")
	c := startHolder(t, state, target)
	_, err := l.TryLock(target, "switch")
	be := wantBusy(t, err, c.pid)
	host, _ := os.Hostname()
	if be.Holder.Host != host || be.Holder.Purpose != "restore" || be.Holder.Stale || be.Holder.InProcess || be.Target != target {
		t.Fatalf("holder %+v, target %s", be.Holder, be.Target)
	}
	for _, s := range []string{fmt.Sprintf("PID %d", c.pid), host, `"restore"`, target} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("message lacks %q: %v", s, err)
		}
	}
	t.Log(err)

	ok := mustTry(t, l, other, "copy-back") // independent target
	if err := ok.Unlock(); err != nil {
		t.Fatal(err)
	}

	if r := c.do(t, "unlock"); r != "unlocked" {
		t.Fatalf("child: %s", r)
	}
	mine := mustTry(t, l, target, "switch")
	if r := c.do(t, "lock %s copy-back", target); r != fmt.Sprintf("busy %d", os.Getpid()) {
		t.Fatalf("child while this process holds the lock: %s", r)
	}
	if err := mine.Unlock(); err != nil {
		t.Fatal(err)
	}
	if r := c.do(t, "lock %s copy-back", target); !strings.HasPrefix(r, "locked ") {
		t.Fatalf("child after release: %s", r)
	}
}

// A holder killed with SIGKILL frees the lock (the kernel closes its file);
// its sidecar stays, marked stale when read, and is replaced by the next
// holder's.
func TestHolderKilled(t *testing.T) {
	l, state, work := newLocker(t, Options{Wait: -1})
	target := filepath.Join(work, "ws")
	c := startHolder(t, state, target)
	_, lockFile, err := l.LockFile(target)
	if err != nil {
		t.Fatal(err)
	}
	before := inode(t, lockFile)
	c.kill9(t)

	o, ok := ReadOwner(ownerPath(lockFile))
	if !ok || o.PID != c.pid || !o.Stale {
		t.Fatalf("sidecar after kill: %+v ok=%v, want PID %d marked stale", o, ok, c.pid)
	}
	k := mustTry(t, l, target, "switch")
	defer k.Unlock()
	if o, ok := ReadOwner(ownerPath(lockFile)); !ok || o.PID != os.Getpid() || o.Stale || o.Purpose != "switch" {
		t.Fatalf("sidecar after retaking: %+v ok=%v", o, ok)
	}
	if after := inode(t, lockFile); after != before {
		t.Fatalf("lock file inode changed from %d to %d", before, after)
	}
}

// Lock gives up after exactly the configured wait, by the fake clock,
// naming the other process; its pauses grow from 50ms to 1s.
func TestWaitLimit(t *testing.T) {
	for _, tc := range []struct {
		wait     time.Duration
		attempts int
	}{
		// 0, .05, .15, .35, .75, then 1.55 ... 29.55 each second, then 30.
		{0, 35},
		{5 * time.Second, 10}, // 0, .05, .15, .35, .75, 1.55, 2.55, 3.55, 4.55, 5
		{40 * time.Millisecond, 2},
	} {
		t.Run(fmt.Sprint(tc.wait), func(t *testing.T) {
			clk := newFakeClock()
			l, state, work := newLocker(t, Options{Wait: tc.wait, Clock: clk})
			want := tc.wait
			if want == 0 {
				want = DefaultWait
			}
			target := filepath.Join(work, "ws")
			c := startHolder(t, state, target)
			done := make(chan lockResult, 1)
			go func() {
				k, err := l.Lock(t.Context(), target, "switch")
				done <- lockResult{k, err}
			}()
			var pauses []time.Duration
			var res lockResult
		loop:
			for {
				select {
				case d := <-clk.Waits():
					if d > maxDelay {
						t.Fatalf("pause %s longer than %s", d, maxDelay)
					}
					pauses = append(pauses, d)
					clk.Advance(d)
				case res = <-done:
					break loop
				}
			}
			be := wantBusy(t, res.err, c.pid)
			if be.Waited != want || be.Attempts != tc.attempts || len(pauses) != tc.attempts-1 {
				t.Fatalf("waited %s over %d attempts (%d pauses: %v), want %s over %d", be.Waited, be.Attempts, len(pauses), pauses, want, tc.attempts)
			}
			if !strings.Contains(res.err.Error(), "gave up after "+want.String()) {
				t.Fatalf("message: %v", res.err)
			}
		})
	}
}

// A contender that is waiting gets the lock on its next attempt after the
// other process lets go, well before the limit.
func TestWaitThenAcquire(t *testing.T) {
	clk := newFakeClock()
	l, state, work := newLocker(t, Options{Clock: clk})
	target := filepath.Join(work, "ws")
	c := startHolder(t, state, target)
	start := clk.Now()
	done := make(chan lockResult, 1)
	go func() {
		k, err := l.Lock(t.Context(), target, "switch")
		done <- lockResult{k, err}
	}()
	for range 2 { // let it fail three times: at 0, 50ms, 150ms
		clk.Advance(<-clk.Waits())
	}
	pause := <-clk.Waits() // it failed at 150ms and waits now
	if r := c.do(t, "unlock"); r != "unlocked" {
		t.Fatalf("child: %s", r)
	}
	clk.Advance(pause)
	res := drive(clk, done)
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.lk.Unlock()
	if got := clk.Now().Sub(start); got != 350*time.Millisecond {
		t.Fatalf("acquired after %s, want 350ms", got)
	}
	if r := c.do(t, "lock %s copy-back", target); r != fmt.Sprintf("busy %d", os.Getpid()) {
		t.Fatalf("child: %s", r)
	}
}

// The lock file keeps its inode across many acquire/release cycles shared
// between processes and goroutines, and nothing else piles up beside it.
func TestLockFileInodeStable(t *testing.T) {
	l, state, work := newLocker(t, Options{Clock: &instantClock{}, Wait: 1000 * time.Hour})
	target := filepath.Join(work, "ws")
	_, lockFile, err := l.LockFile(target)
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, state)
	var first uint64
	for i := range 100 {
		r := c.do(t, "lock %s restore", target)
		var ino uint64
		if _, err := fmt.Sscanf(r, "locked %d", &ino); err != nil {
			t.Fatalf("cycle %d: child: %s", i, r)
		}
		if i == 0 {
			first = ino
		}
		if ino != first {
			t.Fatalf("cycle %d: child locked inode %d, first was %d", i, ino, first)
		}
		_, err := l.TryLock(target, "switch") // contention
		wantBusy(t, err, c.pid)
		if r := c.do(t, "unlock"); r != "unlocked" {
			t.Fatalf("child: %s", r)
		}
		// Two goroutines of this process contend for it.
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				k, err := l.Lock(t.Context(), target, "copy-back")
				if err == nil {
					if ino := inode(t, k.LockFile()); ino != first {
						err = fmt.Errorf("locked inode %d, first was %d", ino, first)
					} else {
						err = errors.Join(k.Verify(), k.Unlock())
					}
				}
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("cycle %d: %v", i, err)
			}
		}
	}
	if got := inode(t, lockFile); got != first {
		t.Fatalf("lock file inode %d, first was %d", got, first)
	}
	ents, err := os.ReadDir(filepath.Dir(lockFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != filepath.Base(lockFile) {
		t.Fatalf("lock directory holds %v, want only %s", ents, filepath.Base(lockFile))
	}
}

// Verify catches a lock file deleted behind the holder's back (which the
// contract forbids), and a newcomer then gets its own inode: the reason the
// file must never be deleted.
func TestVerifyDetectsReplacedLockFile(t *testing.T) {
	l, _, work := newLocker(t, Options{Wait: -1})
	k := mustTry(t, l, filepath.Join(work, "ws"), "switch")
	defer k.Unlock()
	if err := k.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(k.LockFile()); err != nil {
		t.Fatal(err)
	}
	if err := k.Verify(); !errors.Is(err, ErrLockFileReplaced) {
		t.Fatalf("Verify after the lock file was deleted: %v", err)
	}
}

// A holder that has the flock but has not written its sidecar yet (here: a
// raw flock taken by the test, after a killed holder left its sidecar) is
// reported as unrecorded, never as the dead PID the stale sidecar names.
func TestBusyWithStaleOrMissingSidecar(t *testing.T) {
	l, state, work := newLocker(t, Options{Wait: -1})
	target := filepath.Join(work, "ws")
	c := startHolder(t, state, target)
	c.kill9(t)
	_, lockFile, _ := l.LockFile(target)
	f, err := openLockFile(lockFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ok, err := tryFlock(f); !ok || err != nil {
		t.Fatalf("raw flock after the holder died: %v %v", ok, err)
	}
	_, err = l.TryLock(target, "switch")
	var be *BusyError
	if !errors.As(err, &be) || !be.HolderKnown || !be.Holder.Stale || be.Holder.PID != c.pid ||
		!strings.Contains(err.Error(), "no longer running, so it is not the holder") {
		t.Fatalf("with a stale sidecar: %v", err)
	}
	if err := os.Remove(ownerPath(lockFile)); err != nil {
		t.Fatal(err)
	}
	_, err = l.TryLock(target, "switch")
	if !errors.As(err, &be) || be.HolderKnown || !strings.Contains(err.Error(), "has not recorded itself yet") {
		t.Fatalf("without a sidecar: %v", err)
	}
}

// A symlink planted where the lock file belongs is refused, not followed.
func TestLockFileSymlinkRefused(t *testing.T) {
	l, _, work := newLocker(t, Options{Wait: -1})
	target := filepath.Join(work, "ws")
	_, lockFile, _ := l.LockFile(target)
	if err := os.Symlink(filepath.Join(work, "elsewhere"), lockFile); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(target, "switch"); err == nil || errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), lockFile) {
		t.Fatalf("TryLock through a symlinked lock file: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(work, "elsewhere")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the symlink was followed: %v", err)
	}
}
