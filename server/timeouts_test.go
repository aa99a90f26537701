package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"lifeboat/recovery"
)

// dial opens a raw connection to the test server. Its deadline only
// turns a regression into a failure instead of a hung test: the tests
// wait on the server closing the connection, never on this.
func (e *env) dial() net.Conn {
	e.t.Helper()
	c, err := net.Dial("tcp", e.http.Listener.Addr().String())
	must(e.t, err)
	e.t.Cleanup(func() { c.Close() })
	must(e.t, c.SetDeadline(time.Now().Add(2*time.Minute)))
	return c
}

// closedByServer reads rd to its end: the server must close the
// connection (a read that returns EOF), not leave it open until the
// guard deadline.
func closedByServer(t *testing.T, rd io.Reader, what string) {
	t.Helper()
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("%s: the server did not close the connection: %v", what, err)
	}
	if len(rest) != 0 {
		t.Fatalf("%s: more after the answer: %q", what, rest)
	}
}

// shortTimeouts makes a server whose read, write and idle timeouts are d.
func shortTimeouts(t *testing.T, d time.Duration) *env {
	return newEnvConfig(t, nil, func(c *Config) { c.Timeouts = Timeouts{Read: d, Write: d, Idle: d} })
}

// TestSlowBodyClosed: a client that sends the headers and then its body
// too slowly (here one byte of a 100-byte body, then nothing) is answered
// 408 request_timeout once the read timeout has passed, and the
// connection is closed, on every route that reads a body. Nothing is
// registered, approved or appended.
func TestSlowBodyClosed(t *testing.T) {
	e := shortTimeouts(t, 100*time.Millisecond)
	e.workspace("w1", map[string]string{"a": "a"})
	var p recovery.RegisteredProcess
	e.ok(http.StatusCreated, "POST", "/v1/workspaces/w1/processes", userToken, registerProcessRequest{Command: []string{"sleep", "9"}}, &p)
	for _, path := range []string{"/v1/workspaces", "/v1/workspaces/w1/recovery/approve", "/v1/workspaces/w1/processes/" + p.ID + "/output"} {
		c := e.dial()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: lifeboat\r\nAuthorization: Bearer %s\r\nIdempotency-Key: slow-1\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{", path, userToken)
		rd := bufio.NewReader(c)
		res, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", path, err)
		}
		var ae apiError
		err = json.NewDecoder(res.Body).Decode(&ae)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusRequestTimeout || ae.Code != "request_timeout" {
			t.Fatalf("%s: %d %+v (%v)", path, res.StatusCode, ae, err)
		}
		closedByServer(t, rd, path)
	}
	var list []workspaceView
	e.ok(http.StatusOK, "GET", "/v1/workspaces", userToken, nil, &list)
	e.rec.mu.Lock()
	approvals := e.rec.approvals
	e.rec.mu.Unlock()
	if len(list) != 1 || approvals != 0 {
		t.Fatalf("a timed-out body changed something: %d workspaces, %d approvals", len(list), approvals)
	}
}

// TestSlowHeadersClosed: a connection that sends half its headers, or
// nothing at all, is closed without an answer after the header timeout
// (the read timeout when it is under 10 s).
func TestSlowHeadersClosed(t *testing.T) {
	e := shortTimeouts(t, 100*time.Millisecond)
	half := e.dial()
	fmt.Fprintf(half, "GET /v1/workspaces HTTP/1.1\r\nHost: lifeboat\r\n")
	silent := e.dial()
	for name, c := range map[string]net.Conn{"half headers": half, "silent": silent} {
		closedByServer(t, c, name)
	}
}

// TestIdleConnectionsClosed: 20 keep-alive connections that each made a
// request and then wait are all closed after the idle timeout.
func TestIdleConnectionsClosed(t *testing.T) {
	e := shortTimeouts(t, 100*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 20 {
		c := e.dial()
		wg.Go(func() {
			fmt.Fprintf(c, "GET /v1/workspaces HTTP/1.1\r\nHost: lifeboat\r\nAuthorization: Bearer %s\r\n\r\n", userToken)
			rd := bufio.NewReader(c)
			res, err := http.ReadResponse(rd, nil)
			if err != nil {
				t.Errorf("connection %d: %v", i, err)
				return
			}
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK || res.Close {
				t.Errorf("connection %d: %d close=%v %v", i, res.StatusCode, res.Close, err)
				return
			}
			if _, err := rd.ReadByte(); !errors.Is(err, io.EOF) {
				t.Errorf("connection %d: the idle connection was not closed: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// TestStreamOutlivesTimeouts: an event stream stays open well past the
// read, write and idle timeouts (each 50 ms): the stream has no read
// deadline and its write deadline is set again for each event and
// keep-alive. Ten keep-alives 10 ms apart take at least 100 ms (a ticker
// never ticks early); then an event still arrives.
func TestStreamOutlivesTimeouts(t *testing.T) {
	e := newEnvConfig(t, nil, func(c *Config) {
		c.Timeouts = Timeouts{Read: 50 * time.Millisecond, Write: 50 * time.Millisecond, Idle: 50 * time.Millisecond}
		c.Heartbeat = 10 * time.Millisecond
	})
	s := e.stream(userToken, "")
	s.must(t, "hello")
	for n := 0; n < 10; {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %d keep-alives: %v", n, err)
		}
		if line == ": keep-alive\n" {
			n++
		}
	}
	e.srv.Events().Publish("after", "w1", nil)
	if ev := s.must(t, "after"); ev.ID != e.srv.Events().Epoch()+"-1" {
		t.Fatalf("event after the timeouts: %+v", ev)
	}
}

// TestHTTPServerTimeouts: the http.Server carries the header and idle
// timeouts (the body and write deadlines are per request), and a Config
// without timeouts gets the defaults.
func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hs := e.srv.HTTPServer()
	if hs.ReadHeaderTimeout != maxHeaderTimeout || hs.IdleTimeout != DefaultTimeouts.Idle || hs.ReadTimeout != 0 || hs.WriteTimeout != 0 {
		t.Fatalf("default: %+v", hs)
	}
	if e.srv.timeouts != DefaultTimeouts {
		t.Fatalf("default timeouts: %+v", e.srv.timeouts)
	}
	short := shortTimeouts(t, 3*time.Second).srv.HTTPServer()
	if short.ReadHeaderTimeout != 3*time.Second || short.IdleTimeout != 3*time.Second {
		t.Fatalf("short: %+v", short)
	}
}
