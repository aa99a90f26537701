package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// Timeouts bound how long one connection may hold the server, so that
// slow or idle clients cannot use up its connections.
type Timeouts struct {
	// Read bounds the reading of a request: its headers must arrive
	// within Read (at most 10 s), then its body within Read of the
	// headers. A body that does not is answered 408 request_timeout and
	// the connection is closed.
	Read time.Duration
	// Write bounds the writing of an answer, from its first byte (not
	// the work before it: a capture now answers when the capture has
	// ended). The event stream has it again for each event it writes.
	Write time.Duration
	// Idle is how long a keep-alive connection may wait for its next
	// request before it is closed.
	Idle time.Duration
}

// DefaultTimeouts are the timeouts of a Config that sets none.
var DefaultTimeouts = Timeouts{Read: 30 * time.Second, Write: 30 * time.Second, Idle: time.Minute}

// maxHeaderTimeout bounds the reading of a request's headers.
const maxHeaderTimeout = 10 * time.Second

func (t Timeouts) orDefault() Timeouts {
	if t.Read <= 0 {
		t.Read = DefaultTimeouts.Read
	}
	if t.Write <= 0 {
		t.Write = DefaultTimeouts.Write
	}
	if t.Idle <= 0 {
		t.Idle = DefaultTimeouts.Idle
	}
	return t
}

// HTTPServer is the http.Server that serves s: the header and idle
// timeouts are set on it, the body read and answer write deadlines per
// request by s's handler (http.ResponseController), so that the event
// stream can be exempt from them. Serve it with Serve or ServeTLS.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: min(s.timeouts.Read, maxHeaderTimeout), IdleTimeout: s.timeouts.Idle}
}

// errBodyTimeout answers a body that did not arrive within the read
// timeout.
var errBodyTimeout = &apiError{http.StatusRequestTimeout, "request_timeout",
	"the request body did not arrive within the server's read timeout ([server] read_timeout): send the whole body at once"}

// readDeadline sets the deadline of r's body, read within t, and returns
// the body for the handler; without a body the deadline is lifted at once.
// The deadline is lifted when the body has been read to its end, so that
// a long answer or the event stream is not cut by it (net/http cancels a
// request whose connection read fails).
func readDeadline(rc *http.ResponseController, r *http.Request, t time.Duration) io.ReadCloser {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		_ = rc.SetReadDeadline(time.Time{})
		return r.Body
	}
	_ = rc.SetReadDeadline(time.Now().Add(t))
	return &deadlineBody{ReadCloser: r.Body, rc: rc}
}

// deadlineBody lifts the read deadline at the end of the body and turns a
// read past the deadline into errBodyTimeout.
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = errBodyTimeout
	}
	return n, err
}

// extendWrite gives the next write of an answer the whole write timeout.
func (s *Server) extendWrite(rc *http.ResponseController) {
	_ = rc.SetWriteDeadline(time.Now().Add(s.timeouts.Write))
}
