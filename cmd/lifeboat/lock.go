package main

import (
	"context"
	"os"
	"time"

	"lifeboat/repo"
)

// lockWaitDefault is how long a command waits for a conflicting lock
// (--lock-wait, LIFEBOAT_LOCK_WAIT) before it fails with exit code 12.
const lockWaitDefault = 5 * time.Minute

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// lockOptions are the options every command locks with.
func (g *globalOptions) lockOptions(command string) repo.LockOptions {
	wait := g.lockWait
	if wait == 0 {
		wait = -1 // --lock-wait 0: do not wait
	}
	return repo.LockOptions{Wait: wait, Command: command, OnWait: func(h repo.LockInfo) {
		g.out.note("waiting up to %s for the repository: %s", g.lockWait, h)
	}}
}

// withLockedRepo is withRepo (with the index) under a repository lock of
// mode m, taken by repo.WithLock (the index is synced again once the lock
// is held, so nothing deleted by a prune that finished before is trusted).
func (g *globalOptions) withLockedRepo(ctx context.Context, m repo.LockMode, command string, fn func(r *repo.Repository, l *repo.Lock) error) error {
	return g.withRepo(ctx, true, func(r *repo.Repository) error {
		return r.WithLock(ctx, m, g.lockOptions(command), func(l *repo.Lock) error { return fn(r, l) })
	})
}
