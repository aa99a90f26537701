package dirlock

import (
	"context"
	"time"
)

// Clock is the time source for waits between lock attempts and copy-back
// retries. Tests use a fake one that moves only when they advance it.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After returns time.After(d); an abandoned timer is collected by the
// runtime (Go 1.23 and later).
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// sleep waits d on c; false if ctx ended first.
func sleep(ctx context.Context, c Clock, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c.After(d):
		return true
	}
}
