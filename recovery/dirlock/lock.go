package dirlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	// DefaultWait is how long Lock tries a busy target before it fails.
	DefaultWait = 30 * time.Second
	firstDelay  = 50 * time.Millisecond
	maxDelay    = time.Second
	// replacedRetries bounds immediate retries when the lock file is
	// found replaced under a fresh flock (see acquire).
	replacedRetries = 3
)

// Options tune a Locker. Zero values take the defaults.
type Options struct {
	// Wait is how long Lock keeps trying a busy target; default
	// DefaultWait; negative: one attempt.
	Wait  time.Duration
	Clock Clock // default RealClock
}

// Locker takes directory-merge locks under one state root. It is safe for
// concurrent use; Lockers of one process share one table of held locks.
type Locker struct {
	dir  string // canonical <state root>/locks/directory-merge
	wait time.Duration
	clk  Clock
	host string
}

// New returns a Locker keeping its lock files under
// <stateRoot>/locks/directory-merge, which it creates.
func New(stateRoot string, o Options) (*Locker, error) {
	dir := filepath.Join(stateRoot, "locks", "directory-merge")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dirlock: creating the lock directory: %w", err)
	}
	// Resolve it fully, so that two spellings of one state root share the
	// in-process table.
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, fmt.Errorf("dirlock: resolving the lock directory %s: %w", dir, err)
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.Clock == nil {
		o.Clock = RealClock{}
	}
	host, _ := os.Hostname()
	return &Locker{dir: real, wait: o.Wait, clk: o.Clock, host: host}, nil
}

// LockFile returns the canonical form of target and the path of its lock
// file: <dir>/<hex SHA-256 of the canonical path>.lock.
func (l *Locker) LockFile(target string) (canonical, lockFile string, err error) {
	canonical, err = Canonical(target)
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256([]byte(canonical))
	return canonical, filepath.Join(l.dir, hex.EncodeToString(sum[:])+".lock"), nil
}

func ownerPath(lockFile string) string { return strings.TrimSuffix(lockFile, ".lock") + ".owner" }

// TryLock makes one attempt at target's lock. A busy lock is a *BusyError
// at once. purpose ("restore", "switch", "copy-back") goes into the owner
// sidecar, for messages.
func (l *Locker) TryLock(target, purpose string) (*Lock, error) {
	canon, path, err := l.LockFile(target)
	if err != nil {
		return nil, err
	}
	lk, busy, err := l.attempt(canon, path, purpose)
	if busy != nil {
		busy.Attempts = 1
	}
	return lk, firstErr(err, busy)
}

// Lock takes target's lock, trying again with growing pauses (50ms
// doubling to 1s, by the Locker's Clock) while another goroutine or process
// holds it. Each attempt is non-blocking; the calling goroutine waits on
// the clock or ctx, nothing else is held meanwhile. After Options.Wait it
// fails with a *BusyError naming the holder.
func (l *Locker) Lock(ctx context.Context, target, purpose string) (*Lock, error) {
	canon, path, err := l.LockFile(target)
	if err != nil {
		return nil, err
	}
	start := l.clk.Now()
	delay := firstDelay
	for attempts := 1; ; attempts++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("dirlock: waiting for the lock on %s: %w", canon, err)
		}
		lk, busy, err := l.attempt(canon, path, purpose)
		if err != nil || busy == nil {
			return lk, err
		}
		busy.Attempts = attempts
		busy.Waited = l.clk.Now().Sub(start)
		if l.wait < 0 || busy.Waited >= l.wait {
			return nil, busy
		}
		if !sleep(ctx, l.clk, min(delay, l.wait-busy.Waited)) {
			return nil, fmt.Errorf("dirlock: waiting for the lock on %s, held by %s: %w", canon, busy.Holder, ctx.Err())
		}
		delay = min(2*delay, maxDelay)
	}
}

func firstErr(err error, busy *BusyError) error {
	if err != nil {
		return err
	}
	if busy != nil {
		return busy
	}
	return nil
}
