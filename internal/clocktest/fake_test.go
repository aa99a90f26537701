package clocktest

import (
	"testing"
	"time"
)

func TestFakeFiresOnlyDueTimers(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(start)
	now, soon, later := c.After(0), c.After(time.Second), c.After(time.Minute)
	for _, d := range []time.Duration{0, time.Second, time.Minute} {
		if got := <-c.Waits(); got != d {
			t.Fatalf("announced %s, want %s", got, d)
		}
	}
	if got := <-now; !got.Equal(start) {
		t.Fatalf("After(0) fired at %v", got)
	}
	c.Advance(time.Second)
	if got := <-soon; !got.Equal(start.Add(time.Second)) {
		t.Fatalf("1s timer fired at %v", got)
	}
	select {
	case <-later:
		t.Fatal("the 1m timer fired after 1s")
	default:
	}
	c.WaitFor(t, time.Minute) // still pending
	c.Advance(time.Minute)
	if got := <-later; !got.Equal(c.Now()) {
		t.Fatalf("1m timer fired at %v, clock at %v", got, c.Now())
	}
}
