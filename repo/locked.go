package repo

import (
	"context"
	"errors"
)

// WithLock runs fn under a repository lock of mode m (Locked), then
// flushes what fn saved before the lock is released; a one-shot command
// uses it around its whole run.
func (r *Repository) WithLock(ctx context.Context, m LockMode, o LockOptions, fn func(l *Lock) error) error {
	return r.Locked(ctx, m, o, func(l *Lock) error {
		err := fn(l)
		if ferr := r.Flush(ctx); err == nil && !errors.Is(ferr, ErrClosed) {
			err = ferr
		}
		return err
	})
}

// Locked runs fn under a repository lock of mode m: it takes the lock
// (waiting as o says), syncs the local index so that nothing a prune
// removed before the lock was granted is trusted, runs fn, and releases
// the lock. fn's error comes first; a lock lost while fn ran fails the
// call too. It does not flush: work that saves blobs flushes them itself
// before it names them, and a long-lived process (`lifeboat serve`) runs
// its pieces of work but captures (a capture is a Session and takes no
// lock) under shared locks (SharedLock), so an exclusive locker gets its
// turn between them, and one piece of work does not upload another's open
// packs.
func (r *Repository) Locked(ctx context.Context, m LockMode, o LockOptions, fn func(l *Lock) error) error {
	l, err := r.Lock(ctx, m, o)
	if err != nil {
		return err
	}
	defer func() { _ = l.Unlock(context.WithoutCancel(ctx)) }()
	if _, err := r.SyncIndex(ctx); err != nil {
		return err
	}
	err = fn(l)
	if err == nil {
		err = l.Err()
	}
	return err
}
