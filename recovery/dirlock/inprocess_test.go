//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package dirlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Goroutines of one process exclude each other, also through two Lockers
// on two spellings of one state root and two spellings of one target. The
// plain counter would be a data race under -race if two were inside at once
// without the lock's happens-before.
func TestGoroutineExclusion(t *testing.T) {
	clk := &instantClock{}
	state, work := t.TempDir(), t.TempDir()
	if err := os.Symlink(state, filepath.Join(work, "state-link")); err != nil {
		t.Fatal(err)
	}
	var lockers [2]*Locker
	for i, root := range []string{state, filepath.Join(work, "state-link")} {
		l, err := New(root, Options{Clock: clk, Wait: 1000 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		lockers[i] = l
	}
	if err := os.Mkdir(filepath.Join(work, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	spellings := []string{filepath.Join(work, "ws"), filepath.Join(work, "sub", "..", "ws")}

	const workers, rounds = 8, 50
	var inside atomic.Int32
	plain := 0
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for r := range rounds {
				k, err := lockers[(w+r)%2].Lock(t.Context(), spellings[r%2], "restore")
				if err != nil {
					errs <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					errs <- fmt.Errorf("%d holders inside at once", n)
					return
				}
				plain++
				inside.Add(-1)
				if err := k.Unlock(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if plain != workers*rounds {
		t.Fatalf("counter %d, want %d", plain, workers*rounds)
	}
}

// A second Locker of this process is refused with "this process" as the
// holder: exclusion in one process does not rest on flock alone.
func TestSameProcessHolderNamed(t *testing.T) {
	l1, state, work := newLocker(t, Options{Wait: -1})
	l2, err := New(state+"/.", Options{Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(work, "ws")
	k := mustTry(t, l1, target, "restore")
	_, err = l2.TryLock(target, "switch")
	be := wantBusy(t, err, os.Getpid())
	if !be.Holder.InProcess || !strings.Contains(err.Error(), "this process") || !strings.Contains(err.Error(), `"restore"`) {
		t.Fatalf("holder %+v: %v", be.Holder, err)
	}
	if err := k.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := k.Unlock(); err != nil { // again: same result
		t.Fatal(err)
	}
	if _, err := os.Stat(ownerPath(k.LockFile())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sidecar after unlock: %v", err)
	}
	if _, err := os.Stat(k.LockFile()); err != nil {
		t.Fatalf("lock file after unlock: %v", err)
	}
	mustTry(t, l2, target, "switch").Unlock()
}

// While one caller waits for a busy target (its clock is never advanced),
// independent targets are taken at once, all held together.
func TestIndependentTargetsParallel(t *testing.T) {
	clk := newFakeClock()
	l, _, work := newLocker(t, Options{Clock: clk})
	busyTarget := filepath.Join(work, "busy")
	holder := mustTry(t, l, busyTarget, "restore")

	waiter := make(chan lockResult, 1)
	go func() {
		k, err := l.Lock(t.Context(), busyTarget, "switch")
		waiter <- lockResult{k, err}
	}()
	pause := <-clk.Waits() // the waiter failed once and now waits on the clock

	const n = 8
	var acquired sync.WaitGroup
	acquired.Add(n)
	release := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			k, err := l.TryLock(filepath.Join(work, fmt.Sprint("ws", i)), "restore")
			acquired.Done()
			if err != nil {
				errs <- err
				return
			}
			<-release // hold until all have it
			errs <- k.Unlock()
		}()
	}
	acquired.Wait()
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-waiter:
		t.Fatalf("waiter returned while the target was held: %v", r.err)
	default:
	}
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(pause)
	r := drive(clk, waiter)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.lk.Unlock()
}

// A cancelled context ends a wait at once, naming the holder.
func TestLockCancelled(t *testing.T) {
	clk := newFakeClock()
	l, _, work := newLocker(t, Options{Clock: clk})
	target := filepath.Join(work, "ws")
	holder := mustTry(t, l, target, "restore")
	defer holder.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan lockResult, 1)
	go func() {
		k, err := l.Lock(ctx, target, "switch")
		done <- lockResult{k, err}
	}()
	<-clk.Waits()
	cancel()
	r := <-done
	if !errors.Is(r.err, context.Canceled) || r.lk != nil || !strings.Contains(r.err.Error(), "this process") {
		t.Fatalf("Lock after cancel: %v", r.err)
	}
}
