package server

import (
	"fmt"
	"net/http"
	"time"
)

// stream is the server-sent-events stream of every change. It starts with
// a "hello" event whose id is the current event id; with a Last-Event-ID
// header of this process it first replays what the client missed, or
// sends "resync" when that is no longer kept or the id is of another
// process (the client then reloads the state). Each change is one event:
// id is "EPOCH-SEQ", event its type, data the JSON Message.
//
// The stream is exempt from the request's deadlines: it has no read
// deadline (wrap lifts it), and the write deadline is set again before
// each event or keep-alive, so a stream stays open for hours while a
// client that stops reading is still cut after the write timeout.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) error {
	var after uint64
	replay, foreign := false, false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		epoch, n, err := parseEventID(v)
		if err != nil {
			return badRequest(err.Error())
		}
		after, replay, foreign = n, true, epoch != s.events.Epoch()
	}
	if foreign { // an earlier process's numbering: what it sent is gone
		after, replay = 0, false
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
	if !complete || foreign {
		first = "resync"
	}
	// The id is the current event id, so a client that reconnects before
	// any change still gets everything after this point.
	fmt.Fprintf(w, "retry: 2000\nid: %s\nevent: %s\ndata: {\"epoch\":%q,\"seq\":%d}\n\n", s.events.ID(seq), first, s.events.Epoch(), seq)
	for _, m := range backlog {
		s.writeEvent(w, m)
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
			s.extendWrite(rc)
			s.writeEvent(w, m)
		case <-beat.C:
			s.extendWrite(rc)
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-r.Context().Done():
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

func (s *Server) writeEvent(w http.ResponseWriter, m Message) {
	fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", s.events.ID(m.Seq), m.Type, m.raw)
}
