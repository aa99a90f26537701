package repo

import (
	"context"
	"sync"
	"time"
)

// SharedLock is a shared repository lock that a long-lived process
// (`lifeboat serve`) shares among its pieces of work. A piece that begins
// less than join after the lock was granted runs under it, without a
// lock object of its own; one that begins later waits until the pieces
// under it are done and it is released, then takes a new one. The lock
// is released join after it was granted, or as soon as its last piece
// is done after that. So a server writes, lists and removes a lock
// object about once per join, not once per piece of work, and an
// exclusive locker (prune's delete phase, a forget's removal) waits at
// most join and the longest piece: new pieces wait behind its waiting
// object (Repository.Lock).
type SharedLock struct {
	r    *Repository
	o    LockOptions
	join time.Duration

	mu      sync.Mutex
	l       *Lock // held, or nil
	granted startTime
	users   int           // pieces of work under l
	taking  bool          // a piece is taking a new lock
	closed  bool          // Close was called
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

// Close releases the lock once the pieces under it are done; later Runs
// take locks of their own, as Locked does.
func (s *SharedLock) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.expire()
}

func (s *SharedLock) acquire(ctx context.Context) (*Lock, error) {
	s.mu.Lock()
	for {
		if old := s.detach(); old != nil {
			s.mu.Unlock()
			_ = old.Unlock(context.WithoutCancel(ctx))
			s.mu.Lock()
			continue
		}
		switch {
		case s.l != nil && s.joinable():
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
				if !s.closed {
					time.AfterFunc(s.join, s.expire)
				}
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

func (s *SharedLock) release() {
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
	s.expire()
}

// expire releases the lock if nothing runs under it and it may no longer
// be joined.
func (s *SharedLock) expire() {
	s.mu.Lock()
	l := s.detach()
	s.mu.Unlock()
	if l != nil {
		_ = l.Unlock(context.Background())
	}
}

// joinable reports whether a piece of work may run under the held lock.
// s.mu held.
func (s *SharedLock) joinable() bool {
	return !s.closed && s.r.since(s.granted) < s.join && s.l.Err() == nil
}

// detach takes the held lock out, for the caller to release, when
// nothing runs under it and it may no longer be joined. s.mu held.
func (s *SharedLock) detach() *Lock {
	l := s.l
	if l == nil || s.users > 0 || s.joinable() {
		return nil
	}
	s.l = nil
	s.broadcast()
	return l
}

// broadcast wakes the waiters. s.mu held.
func (s *SharedLock) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}
