//go:build lifeboat_testhooks

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"lifeboat/backend"
)

// crashingBackend is the backend decorator behind crashEnv and crashRemoveEnv.
type crashingBackend struct {
	backend.Backend
	saves, removes atomic.Int64
}

// withCrashHook wraps be when crashEnv or crashRemoveEnv is set.
func withCrashHook(be backend.Backend) backend.Backend {
	s, serr := strconv.Atoi(os.Getenv(crashEnv))
	r, rerr := strconv.Atoi(os.Getenv(crashRemoveEnv))
	if (serr != nil || s <= 0) && (rerr != nil || r <= 0) {
		return be
	}
	c := &crashingBackend{Backend: be}
	c.saves.Store(int64(s))
	c.removes.Store(int64(r))
	return c
}

// Unwrap gives the backend under the hook (see backend.As).
func (c *crashingBackend) Unwrap() backend.Backend { return c.Backend }

func crashAt(counter *atomic.Int64) {
	if counter.Add(-1) == 0 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

func (c *crashingBackend) Save(ctx context.Context, h backend.Handle, data []byte) error {
	err := c.Backend.Save(ctx, h, data)
	if err == nil {
		crashAt(&c.saves)
	}
	return err
}

func (c *crashingBackend) Remove(ctx context.Context, h backend.Handle) error {
	err := c.Backend.Remove(ctx, h)
	if err == nil {
		crashAt(&c.removes)
	}
	return err
}

// recoveryStopHook returns the recovery.ServiceConfig.TestStep behind
// recoveryStopEnv, or nil when it is not set.
func recoveryStopHook() func(point string) {
	at := os.Getenv(recoveryStopEnv)
	if at == "" {
		return nil
	}
	return func(point string) {
		if point != at {
			return
		}
		// Blocks until the test kills the process, or stops it (SIGSTOP)
		// and lets it go on (SIGCONT): then the operation goes on from
		// here, as a server paused mid-step would.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		defer signal.Stop(cont)
		fmt.Fprintln(os.Stderr, "at", point)
		<-cont
	}
}

// pruneClock returns the clock pruneClockEnv shifts, or nil.
func pruneClock() func() time.Time {
	d, err := time.ParseDuration(os.Getenv(pruneClockEnv))
	if err != nil || d == 0 {
		return nil
	}
	return func() time.Time { return time.Now().Add(d) }
}
