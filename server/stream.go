package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// stream is the server-sent-events stream of every change. It starts with
// a "hello" event whose id is the current sequence number; with a
// Last-Event-ID header it first replays what the client missed, or sends
// "resync" when that is no longer kept (the client then reloads the
// state). Each change is one event: id is its sequence number, event its
// type, data the JSON Message.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) error {
	var after uint64
	replay := false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return badRequest(fmt.Sprintf("Last-Event-ID %q is not an event id", v))
		}
		after, replay = n, true
	}
	sub, backlog, complete, seq := s.events.subscribe(after, replay)
	defer s.events.unsubscribe(sub)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	first := "hello"
	if !complete {
		first = "resync"
	}
	// The id is the current sequence number, so a client that reconnects
	// before any change still gets everything after this point.
	fmt.Fprintf(w, "retry: 2000\nid: %d\nevent: %s\ndata: {\"seq\":%d}\n\n", seq, first, seq)
	for _, m := range backlog {
		writeEvent(w, m)
	}
	if err := rc.Flush(); err != nil {
		return nil
	}
	beat := time.NewTicker(s.beat)
	defer beat.Stop()
	for {
		select {
		case m, ok := <-sub.ch:
			if !ok {
				return nil // server closing, or this client fell behind: it reconnects
			}
			writeEvent(w, m)
		case <-beat.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-r.Context().Done():
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

func writeEvent(w http.ResponseWriter, m Message) {
	fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", m.Seq, m.Type, m.raw)
}
