package ssetest

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// ReadEvent passes over the retry line and keep-alive comments, returns
// each event, and io.EOF where the stream ends.
func TestReadEvent(t *testing.T) {
	rd := bufio.NewReader(strings.NewReader("retry: 2000\nid: e-1\nevent: hello\ndata: {}\n\n: keep-alive\n\nid: e-2\nevent: receipt\ndata: {\"a\":1}\n\n"))
	for _, want := range []Event{{"e-1", "hello", "{}"}, {"e-2", "receipt", `{"a":1}`}} {
		got, err := ReadEvent(rd)
		if err != nil || got != want {
			t.Fatalf("ReadEvent = %+v, %v; want %+v", got, err, want)
		}
	}
	if _, err := ReadEvent(rd); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}
