package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"lifeboat/recovery"
)

// TestTwoStreamsSeeTheSameState: an inbox and a settings page (two event
// streams) receive the same events, with the same ids and bytes, in the
// same order: a lifecycle receipt, a loss, an approval's operation and
// state, a hold resolution.
func TestTwoStreamsSeeTheSameState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workspace("w1", map[string]string{"a.txt": "a"})
	inbox := e.stream(userToken, "")
	settings := e.stream(operatorToken, "")
	h1, h2 := inbox.must(t, "hello"), settings.must(t, "hello")
	if h1.Data != h2.Data {
		t.Fatalf("hello: %s vs %s", h1.Data, h2.Data)
	}

	var rec recovery.Receipt
	var prev uint64
	// expect reads the next event on both streams: the same, of type typ,
	// with the next id.
	expect := func(i int, typ string) Message {
		t.Helper()
		a, b := inbox.must(t, typ), settings.must(t, typ)
		if a != b {
			t.Fatalf("event %d differs:\n%+v\n%+v", i, a, b)
		}
		epoch, id, err := parseEventID(a.ID)
		if err != nil || epoch != e.srv.Events().Epoch() || id <= prev {
			t.Fatalf("event %d: id %q after %d", i, a.ID, prev)
		}
		prev = id
		var m Message
		must(t, json.Unmarshal([]byte(a.Data), &m))
		if m.Seq != id || m.Type != typ || m.Workspace != "w1" {
			t.Fatalf("event %d: %+v", i, m)
		}
		return m
	}
	e.ok(http.StatusOK, "POST", "/v1/workspaces/w1/checkpoints", userToken, nil, &rec)
	// The receipt is relayed after the HTTP answer: read it before the
	// next event is published, or the two may come in either order.
	m := expect(0, "receipt")
	var r recovery.Receipt
	raw, _ := json.Marshal(m.Data)
	must(t, json.Unmarshal(raw, &r))
	if r.Snapshot != rec.Snapshot || r.Outcome != recovery.Captured {
		t.Fatalf("receipt event: %+v", r)
	}
	e.rec.set(lost("w1", 1, rec.Snapshot, time.Now()))
	e.ok(http.StatusAccepted, "POST", "/v1/workspaces/w1/recovery/approve", userToken, approveRequest{rec.Snapshot}, nil, "Idempotency-Key", "k")
	e.rec.mu.Lock()
	e.rec.holds["h1"] = recovery.Hold{ID: "h1", Workspace: "w1"}
	e.rec.mu.Unlock()
	e.ok(http.StatusOK, "POST", "/v1/repair-holds/h1/resolve", operatorToken, resolveRequest{"discarded", "checked"}, nil)
	for i, typ := range []string{"recovery_state", "operation", "recovery_state", "repair_hold"} {
		expect(i+1, typ)
	}
	var st RecoveryState
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/recovery", userToken, nil, &st)
	if st.State != StateRecovering {
		t.Fatalf("state after approval: %+v", st)
	}
}

// TestStreamReplayAndResync: a stream that reconnects with Last-Event-ID
// gets what it missed; one that missed more than is kept gets "resync".
func TestStreamReplayAndResync(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 3 {
		e.srv.Events().Publish("test", "w1", i)
	}
	ep := e.srv.Events().Epoch()
	if h := e.stream(userToken, "").must(t, "hello"); h.ID != ep+"-3" || h.Data != `{"epoch":"`+ep+`","seq":3}` {
		t.Fatalf("hello: %+v", h)
	}
	s := e.stream(userToken, ep+"-1")
	s.must(t, "hello")
	for _, id := range []string{"2", "3"} {
		if ev := s.must(t, "test"); ev.ID != ep+"-"+id {
			t.Fatalf("replayed %s, want %s-%s", ev.ID, ep, id)
		}
	}
	for i := range ringSize {
		e.srv.Events().Publish("test", "w1", i)
	}
	e.stream(userToken, ep+"-1").must(t, "resync")
	e.stream(userToken, "99999").must(t, "resync") // ids of servers before epochs
	for _, bad := range []string{"x", ep + "-", "-1", ep + "-x", "EPOCH-1", ep + "-1-"} {
		e.fails(http.StatusBadRequest, "bad_request", "GET", "/v1/events", userToken, nil, "Last-Event-ID", bad)
	}
}

// TestStreamIDsAcrossRestart: event ids are not reused by the next server
// process. A client that saw event 31 of one process and reconnects to
// the next one, which has published 34 events of its own, gets resync
// (reload the state), not that process's events 32 to 34 as if it had
// missed only those.
func TestStreamIDsAcrossRestart(t *testing.T) {
	t.Parallel()
	first := newEnv(t)
	for i := range 31 {
		first.srv.Events().Publish("test", "w1", i)
	}
	last := first.stream(userToken, "").must(t, "hello").ID
	if want := first.srv.Events().Epoch() + "-31"; last != want {
		t.Fatalf("hello id %q, want %q", last, want)
	}

	next := newEnv(t) // the restarted server: a new process, a new hub
	if next.srv.Events().Epoch() == first.srv.Events().Epoch() {
		t.Fatal("two hubs have the same epoch")
	}
	for i := range 34 {
		next.srv.Events().Publish("test", "w1", i)
	}
	s := next.stream(userToken, last)
	h := s.must(t, "resync")
	if h.ID != next.srv.Events().Epoch()+"-34" {
		t.Fatalf("resync id %q", h.ID)
	}
	// Nothing of the new process is replayed as if it followed event 31:
	// the next event is the next change.
	next.srv.Events().Publish("after", "w1", nil)
	if ev := s.must(t, "after"); ev.ID != next.srv.Events().Epoch()+"-35" {
		t.Fatalf("after the resync: %+v", ev)
	}
	// With the new process's id, the stream replays as before.
	r := next.stream(userToken, h.ID)
	r.must(t, "hello")
	if ev := r.must(t, "after"); ev.ID != next.srv.Events().Epoch()+"-35" {
		t.Fatalf("replayed: %+v", ev)
	}
}

// TestSlowSubscriberDropped: a subscriber a full buffer behind is dropped
// (its stream ends and it reconnects); the others keep every event.
func TestSlowSubscriberDropped(t *testing.T) {
	t.Parallel()
	ev := NewEvents()
	slow, _, _, _ := ev.subscribe(0, false)
	fast, _, _, _ := ev.subscribe(0, false)
	for i := range subsBuffer + 1 {
		ev.Publish("test", "", i)
		if m := <-fast.ch; m.Data != i { // the fast one keeps up
			t.Fatalf("fast subscriber: got %v, want %d", m.Data, i)
		}
	}
	n := 0
	for range slow.ch {
		n++
	}
	if n != subsBuffer {
		t.Fatalf("the slow subscriber got %d before being dropped, want %d", n, subsBuffer)
	}
	ev.Close()
	if _, open := <-fast.ch; open {
		t.Fatal("Close left a subscriber open")
	}
	ev.Publish("after", "", nil) // dropped, no panic
}

// TestCloseEndsStreams: closing the server ends every event stream, so a
// graceful shutdown does not wait for them.
func TestCloseEndsStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.stream(userToken, "")
	s.must(t, "hello")
	e.srv.Close()
	if _, err := s.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream did not end: %v", err)
	}
}
