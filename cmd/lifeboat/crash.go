package main

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"

	"lifeboat/backend"
)

// crashEnv names a testing hook: when set to N, the process kills itself
// with SIGKILL right after its Nth successful save to the repository, so
// tests can crash a real lifeboat at every write boundary.
const crashEnv = "LIFEBOAT_TEST_CRASH_AFTER_SAVES"

// crashingBackend is the backend decorator behind crashEnv.
type crashingBackend struct {
	backend.Backend
	left atomic.Int64
}

// withCrashHook wraps be when crashEnv is set.
func withCrashHook(be backend.Backend) backend.Backend {
	n, err := strconv.Atoi(os.Getenv(crashEnv))
	if err != nil || n <= 0 {
		return be
	}
	c := &crashingBackend{Backend: be}
	c.left.Store(int64(n))
	return c
}

func (c *crashingBackend) Save(ctx context.Context, h backend.Handle, data []byte) error {
	err := c.Backend.Save(ctx, h, data)
	if err == nil && c.left.Add(-1) == 0 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	return err
}
