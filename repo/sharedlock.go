package repo

import (
	"context"
	"sync"
	"time"
)

// SharedLock is a shared repository lock that a long-lived process
// (`lifeboat serve`) shares among its pieces of work. A piece that begins
// while others run under the lock, less than join after it was granted,
// runs under it too, without a lock object of its own; one that begins
// later waits until the pieces under it are done, then takes a new one.
// The lock is released as soon as no piece runs under it, so a process
// stopped between pieces (SIGSTOP) holds no lock. A busy server thus
// writes, lists and removes a lock object about once per join, not once
// per piece of work, and an exclusive locker (prune's delete phase, a
// forget's removal) waits at most join and the longest piece: new pieces
// wait behind its waiting object (Repository.Lock).
type SharedLock struct {
	r    *Repository
	o    LockOptions
	join time.Duration

	mu      sync.Mutex
	l       *Lock // held, or nil
	granted startTime
	users   int           // pieces of work under l (l is nil when none)
	taking  bool          // a piece is taking a new lock
	changed chan struct{} // closed and replaced whenever the fields above change
}

// NewSharedLock returns a SharedLock taking shared locks with o.
func (r *Repository) NewSharedLock(o LockOptions, join time.Duration) *SharedLock {
	return &SharedLock{r: r, o: o, join: join, changed: make(chan struct{})}
}

// Run runs fn under the shared lock. Unlike Locked it does not sync the
// local index: the lock may have been taken before fn began, so fn syncs
// the index itself when it reads blobs (a restore). A lock lost while fn
// ran fails the call too.
func (s *SharedLock) Run(ctx context.Context, fn func() error) error {
	l, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	err = fn()
	if err == nil {
		err = l.Err()
	}
	s.release()
	return err
}

func (s *SharedLock) acquire(ctx context.Context) (*Lock, error) {
	s.mu.Lock()
	for {
		switch {
		case s.l != nil && s.r.since(s.granted) < s.join && s.l.Err() == nil:
			s.users++
			l := s.l
			s.mu.Unlock()
			return l, nil
		case s.l == nil && !s.taking:
			s.taking = true
			s.mu.Unlock()
			start := s.r.startNow()
			l, err := s.take(ctx)
			s.mu.Lock()
			s.taking = false
			if err == nil {
				s.l, s.granted, s.users = l, start, 1
			}
			s.broadcast()
			s.mu.Unlock()
			return l, err
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
}

func (s *SharedLock) take(ctx context.Context) (*Lock, error) {
	return s.r.Lock(ctx, LockShared, s.o)
}

// release ends a piece of work; the last one under the lock releases it.
func (s *SharedLock) release() {
	s.mu.Lock()
	s.users--
	var l *Lock
	if s.users == 0 {
		l, s.l = s.l, nil
		s.broadcast()
	}
	s.mu.Unlock()
	if l != nil {
		_ = l.Unlock(context.Background())
	}
}

// broadcast wakes the waiters. s.mu held.
func (s *SharedLock) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}
