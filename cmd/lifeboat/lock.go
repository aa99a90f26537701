package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"lifeboat/repo"
)

// lockWaitDefault is how long a command waits for a conflicting lock
// (--lock-wait, LIFEBOAT_LOCK_WAIT) before it fails with exit code 12.
const lockWaitDefault = 5 * time.Minute

// lockWaitEnv is the environment variable --lock-wait defaults to.
const lockWaitEnv = "LIFEBOAT_LOCK_WAIT"

// lockWaitFromEnv sets the lock wait from LIFEBOAT_LOCK_WAIT when
// --lock-wait was not given, refusing a value that is not a duration or is
// negative: a typo must not quietly become the default wait.
func (g *globalOptions) lockWaitFromEnv(flags *pflag.FlagSet) error {
	return durationFromEnv(flags, "lock-wait", lockWaitEnv, &g.lockWait)
}

// durationFromEnv sets *d from the environment variable env when the
// duration flag was not given, refusing a value that is not a duration
// or is negative (a usage error naming env).
func durationFromEnv(flags *pflag.FlagSet, flag, env string, d *time.Duration) error {
	v := os.Getenv(env)
	if v == "" || flags.Changed(flag) {
		return nil
	}
	got, err := time.ParseDuration(v)
	if err != nil {
		return usageError{fmt.Sprintf("%s=%q is not a duration: want a number with a unit, such as 30s, 5m or 1h (0: %s)", env, v, zeroMeaning(flag))}
	}
	if got < 0 {
		return usageError{fmt.Sprintf("%s=%q is negative: want 0 or more, such as 30s or 5m", env, v)}
	}
	*d = got
	return nil
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
