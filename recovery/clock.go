package recovery

import "time"

// Clock is the lifecycle's time source; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// After fires once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// After is time.After.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
