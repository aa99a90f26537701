// Package ssetest reads a server-sent-events stream (text/event-stream)
// in tests: the server's event stream, event by event.
package ssetest

import (
	"bufio"
	"strings"
)

// Event is one server-sent event.
type Event struct {
	ID, Type, Data string
}

// ReadEvent reads the next event of a stream, passing over keep-alive
// comments and the retry line. Its error is the read's: io.EOF when the
// stream ended, also in the middle of an event.
func ReadEvent(rd *bufio.Reader) (Event, error) {
	var ev Event
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.Type != "" || ev.Data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "id: "):
			ev.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.Type = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = strings.TrimPrefix(line, "data: ")
		}
	}
}
