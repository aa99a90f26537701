package recovery

import (
	"context"
	"testing"
)

// Stop cancels a capture that a request joined with a context of its own
// (an API request's, which outlives its client) after the periodic round
// that started it gave up, as when the server shuts down: the request's
// receipt and the workspace's record say cancelled, nothing is promoted,
// and a capture asked for after Stop is cancelled too.
func TestStopCancelsJoinedCapture(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, false, nil)
		e.cap.started, e.cap.gate = make(chan int, 1), make(chan struct{}) // the gate never opens
		joined := make(chan int, 2)
		e.l.hooks.joined = func(_ string, n int) { joined <- n }
		round, endRound := context.WithCancel(context.Background())
		periodic, request := make(chan Receipt, 1), make(chan Receipt, 1)
		go func() { periodic <- e.l.Capture(round, "ws1", ReasonPeriodic) }()
		<-joined
		<-e.cap.started
		go func() { request <- e.l.Capture(context.WithoutCancel(context.Background()), "ws1", ReasonManual) }()
		if n := <-joined; n != 2 {
			t.Fatalf("the request joined as waiter %d", n)
		}
		endRound() // the server's context ends: the periodic round gives up
		e.want(<-periodic, Cancelled)
		e.l.Stop()
		r := <-request
		e.want(r, Cancelled)
		w := e.ws("ws1")
		if w.LastGood != nil || w.InFlight != nil || len(w.Recovery) != 1 || w.Recovery[0].Outcome != Cancelled {
			t.Fatalf("after Stop: %+v", w)
		}
		e.want(e.l.Capture(context.Background(), "ws1", ReasonManual), Cancelled)
		if w := e.ws("ws1"); w.LastGood != nil {
			t.Fatalf("promoted after Stop: %+v", w)
		}
	})
}

// Drain waits for the captures in flight to end (a shutdown's grace): with
// a context already done it returns at once, the capture still running;
// then it returns once the capture ended, promoted.
func TestDrainWaitsForCaptures(t *testing.T) {
	e := newEnv(t, false, false, nil)
	e.cap.started, e.cap.gate = make(chan int, 1), make(chan struct{})
	got := make(chan Receipt, 1)
	go func() { got <- e.l.Capture(context.Background(), "ws1", ReasonPeriodic) }()
	<-e.cap.started
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.l.Drain(done); err != context.Canceled {
		t.Fatalf("Drain with a done context: %v", err)
	}
	drained := make(chan error, 1)
	go func() { drained <- e.l.Drain(context.Background()) }()
	select {
	case err := <-drained:
		t.Fatalf("Drain returned while the capture ran: %v", err)
	default:
	}
	close(e.cap.gate)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	e.want(<-got, Captured)
	if err := e.l.Drain(context.Background()); err != nil {
		t.Fatalf("Drain with nothing in flight: %v", err)
	}
}
