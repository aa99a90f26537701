package clocktest

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Fake is a clock that moves only when a test advances it. Every After
// call is announced on Waits, so a test steps the clock exactly when a
// waiter waits, never sleeping.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []timer
	waits  chan time.Duration
}

type timer struct {
	at time.Time
	d  time.Duration
	ch chan time.Time
}

// New is a Fake that reads start until it is advanced.
func New(start time.Time) *Fake {
	return &Fake{now: start, waits: make(chan time.Duration, 1<<12)}
}

// Now is the clock's time.
func (c *Fake) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// After fires once the clock has been advanced by d (at once when d <= 0)
// and announces d on Waits.
func (c *Fake) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, timer{c.now.Add(d), d, ch})
	}
	c.mu.Unlock()
	select {
	case c.waits <- d:
	default: // 4096 announcements nobody read: the test is not stepping this clock
	}
	return ch
}

// Advance moves the clock by d and fires the timers that are due.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
		} else {
			t.ch <- c.now
		}
	}
	c.timers = kept
}

// Waits receives the duration of every After call, in order (up to 4096
// unread; later ones are dropped). A test
// reads it to know that a waiter is waiting, or leaves it to WaitFor;
// not both.
func (c *Fake) Waits() <-chan time.Duration { return c.waits }

// WaitFor returns once a timer of duration d is pending, failing t after
// a minute without one.
func (c *Fake) WaitFor(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		c.mu.Lock()
		found := slices.ContainsFunc(c.timers, func(ft timer) bool { return ft.d == d })
		c.mu.Unlock()
		if found {
			return
		}
		select {
		case <-c.waits:
		case <-deadline:
			t.Fatalf("no %s timer was registered within a minute", d)
		}
	}
}
