package repo

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"lifeboat/backend"
)

// lockSaves counts the lock objects written.
type lockSaves struct {
	backend.Backend
	n *atomic.Int32
}

func (b lockSaves) Save(ctx context.Context, h backend.Handle, data []byte) error {
	if h.Type == backend.Lock {
		b.n.Add(1)
	}
	return b.Backend.Save(ctx, h, data)
}

// Pieces of work that overlap within the join window share one lock
// object; the lock is released when the last is done, so the next piece
// takes a new one; past the window a piece does not join the running
// ones, it waits for them and takes a new lock; an exclusive locker in
// another process waits while a piece runs and gets its lock once it is
// done.
func TestSharedLockJoins(t *testing.T) {
	ctx := t.Context()
	tr := newTestRepo(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var saves atomic.Int32
	r, err := Open(ctx, lockSaves{tr.be, &saves}, testPassword, Options{CacheDir: t.TempDir(), Now: clock})
	must(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	s := r.NewSharedLock(LockOptions{Command: "test", Refresh: -1}, time.Minute)
	locks := func() int {
		t.Helper()
		ls, err := r.ListLocks(ctx)
		must(t, err)
		return len(ls)
	}
	// holding runs a piece that holds the lock until the returned
	// function is called, which waits for the piece to end.
	holding := func() (end func()) {
		in, out, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() { done <- s.Run(ctx, func() error { close(in); <-out; return nil }) }()
		<-in
		return func() { close(out); must(t, <-done) }
	}

	end := holding()
	must(t, s.Run(ctx, func() error { return nil })) // joins
	if n := saves.Load(); n != 1 || locks() != 1 {
		t.Fatalf("two overlapping pieces: %d lock objects written, %d stored; want 1 and 1", n, locks())
	}
	end()
	if n := locks(); n != 0 {
		t.Fatalf("%d lock objects stored once no piece runs, want 0", n)
	}
	must(t, s.Run(ctx, func() error { return nil }))
	if n := saves.Load(); n != 2 {
		t.Fatalf("a piece after the others ended: %d lock objects written in all, want 2", n)
	}

	end = holding()
	now = now.Add(2 * time.Minute)
	late := make(chan error, 1)
	var ended atomic.Bool
	go func() {
		late <- s.Run(ctx, func() error {
			if !ended.Load() {
				return errors.New("a piece past the window ran beside the piece it could not join")
			}
			return nil
		})
	}()
	ended.Store(true)
	end()
	must(t, <-late)
	if n := saves.Load(); n != 4 {
		t.Fatalf("a piece past the window: %d lock objects written in all, want 4", n)
	}

	other, err := Open(ctx, tr.be, testPassword, Options{CacheDir: t.TempDir(), Now: clock})
	must(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	end = holding()
	waited := 0
	x, err := other.Lock(ctx, LockExclusive, LockOptions{Command: "test exclusive", Refresh: -1, Wait: time.Hour,
		Sleep: func(context.Context, time.Duration) error {
			if waited++; waited == 1 {
				end()
			}
			return nil
		}})
	must(t, err)
	if waited == 0 {
		t.Fatal("the exclusive lock was granted beside the held shared one")
	}
	must(t, x.Unlock(ctx))
}
