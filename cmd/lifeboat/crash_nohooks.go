//go:build !lifeboat_testhooks

package main

import (
	"time"

	"lifeboat/backend"
)

// A release build has no test hooks: the environment variables of
// crash.go are ignored.

// withCrashHook returns be unchanged.
func withCrashHook(be backend.Backend) backend.Backend { return be }

// recoveryStopHook returns nil: recovery never stops at a test point.
func recoveryStopHook() func(point string) { return nil }

// pruneClock returns nil: a two-phase prune uses the real clock.
func pruneClock() func() time.Time { return nil }
