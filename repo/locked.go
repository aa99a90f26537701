package repo

import (
	"context"
	"errors"
)

// WithLock runs fn under a repository lock of mode m: it takes the lock
// (waiting as o says), syncs the local index so that nothing a prune
// removed before the lock was granted is trusted, runs fn, flushes what fn
// saved, and releases the lock. fn's error comes first; a lock lost while
// fn ran fails the call too. A long-lived process (`lifeboat serve`) takes
// one such lock around each piece of work, so a prune in any process gets
// its delete phase between them.
func (r *Repository) WithLock(ctx context.Context, m LockMode, o LockOptions, fn func(l *Lock) error) error {
	l, err := r.Lock(ctx, m, o)
	if err != nil {
		return err
	}
	defer func() { _ = l.Unlock(context.WithoutCancel(ctx)) }()
	if _, err := r.SyncIndex(ctx); err != nil {
		return err
	}
	err = fn(l)
	if ferr := r.Flush(ctx); err == nil && !errors.Is(ferr, ErrClosed) {
		err = ferr
	}
	if err == nil {
		err = l.Err()
	}
	return err
}
