package repo

import (
	"context"
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

// Pieces of work within the join window share one lock object, at once
// or one after another; past the window the next piece takes a new one
// (the old one is gone); an exclusive locker that waits for the idle lock
// gets it once the lock is let go of (Close), and no lock object is left.
func TestSharedLockJoins(t *testing.T) {
	ctx := t.Context()
	tr := newTestRepo(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var saves atomic.Int32
	r, err := Open(ctx, lockSaves{tr.be, &saves}, testPassword, Options{CacheDir: t.TempDir(), Now: func() time.Time { return now }})
	must(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	s := r.NewSharedLock(LockOptions{Command: "test", Refresh: -1}, time.Hour)
	locks := func() int {
		t.Helper()
		ls, err := r.ListLocks(ctx)
		must(t, err)
		return len(ls)
	}

	inFirst, secondDone := make(chan struct{}), make(chan error, 1)
	first := make(chan error, 1)
	go func() {
		first <- s.Run(ctx, func() error {
			close(inFirst)
			return <-secondDone // the second piece runs while this one holds the lock
		})
	}()
	<-inFirst
	secondDone <- s.Run(ctx, func() error { return nil })
	must(t, <-first)
	must(t, s.Run(ctx, func() error { return nil }))
	if n := saves.Load(); n != 1 || locks() != 1 {
		t.Fatalf("three pieces within the window: %d lock objects written, %d stored; want 1 and 1", n, locks())
	}

	now = now.Add(time.Hour)
	must(t, s.Run(ctx, func() error { return nil }))
	if n := saves.Load(); n != 2 || locks() != 1 {
		t.Fatalf("a piece past the window: %d lock objects written, %d stored; want 2 and 1", n, locks())
	}

	other, err := Open(ctx, tr.be, testPassword, Options{CacheDir: t.TempDir(), Now: func() time.Time { return now }})
	must(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	waited := 0
	x, err := other.Lock(ctx, LockExclusive, LockOptions{Command: "test exclusive", Refresh: -1, Wait: time.Hour,
		Sleep: func(context.Context, time.Duration) error {
			waited++
			s.Close() // the idle shared lock is let go of
			return nil
		}})
	must(t, err)
	if waited == 0 {
		t.Fatal("the exclusive lock was granted beside the held shared one")
	}
	must(t, x.Unlock(ctx))
	must(t, s.Run(ctx, func() error { return nil })) // after Close: a lock of its own, released at once
	if n := locks(); n != 0 {
		t.Fatalf("%d lock objects left after Close", n)
	}
}
