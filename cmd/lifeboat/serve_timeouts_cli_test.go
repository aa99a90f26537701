package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"lifeboat/internal/ssetest"
)

// setServerKeys adds keys to the [server] table of s's config file.
func (s *svcEnv) setServerKeys(keys string) {
	s.t.Helper()
	b, err := os.ReadFile(s.cfgPath)
	must(s.t, err)
	must(s.t, os.WriteFile(s.cfgPath, []byte(strings.Replace(string(b), "[server]\n", "[server]\n"+keys, 1)), 0o600))
}

// dialServe opens a raw connection to the server. Its deadline only turns
// a regression into a failure instead of a hung test: the test waits on
// the server closing the connection.
func (s *svcEnv) dialServe() (net.Conn, *bufio.Reader) {
	s.t.Helper()
	u, err := url.Parse(s.url)
	must(s.t, err)
	c, err := net.Dial("tcp", u.Host)
	must(s.t, err)
	s.t.Cleanup(func() { c.Close() })
	must(s.t, c.SetDeadline(time.Now().Add(2*time.Minute)))
	return c, bufio.NewReader(c)
}

// sseReader reads a raw event stream: id and type of each event.
type sseReader struct {
	t  *testing.T
	rd *bufio.Reader
}

func (s *svcEnv) openEvents(lastID string) *sseReader {
	s.t.Helper()
	req, err := http.NewRequest("GET", s.url+"/v1/events", nil)
	must(s.t, err)
	req.Header.Set("Authorization", "Bearer "+s.userTok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	must(s.t, err)
	s.t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("event stream: %d", res.StatusCode)
	}
	return &sseReader{t: s.t, rd: bufio.NewReader(res.Body)}
}

// next returns the next event's id and type (comments skipped).
func (r *sseReader) next() (id, typ string) {
	r.t.Helper()
	ev, err := ssetest.ReadEvent(r.rd)
	if err != nil {
		r.t.Fatalf("the event stream ended: %v", err)
	}
	return ev.ID, ev.Type
}

// nextOf returns the id of the next event of type typ, passing over
// events of other types (the server's own checks publish some).
func (r *sseReader) nextOf(typ string) string {
	r.t.Helper()
	for {
		if id, got := r.next(); got == typ {
			return id
		}
	}
}

// epochSeq splits an event id "EPOCH-SEQ".
func epochSeq(t *testing.T, id string) (string, uint64) {
	t.Helper()
	i := strings.LastIndexByte(id, '-')
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	if i <= 0 || err != nil {
		t.Fatalf("event id %q is not EPOCH-SEQ", id)
	}
	return id[:i], n
}

// park asks the server to park workspace ws (a receipt event follows).
func (s *svcEnv) park(ws string) {
	s.t.Helper()
	if code, body := request(s.t, "POST", s.url+"/v1/workspaces/"+ws+"/park", s.userTok); code != http.StatusOK {
		s.t.Fatalf("park: %d %s", code, body)
	}
}

// TestServeTimeouts: a real `lifeboat serve` takes [server] read_timeout,
// write_timeout and idle_timeout from its config file (here 300 ms
// each): a client sending its body too slowly gets 408 request_timeout
// and its connection closed, an idle keep-alive connection is closed,
// and an event stream keeps delivering events well past the write
// timeout.
func TestServeTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, "")
	s.setServerKeys("read_timeout = \"300ms\"\nwrite_timeout = \"300ms\"\nidle_timeout = \"300ms\"\n")
	s.sandbox("bot1", 1)
	s.start()
	s.cliOK("workspace", "add", "bot1", "--provider", "local")

	stream := s.openEvents("")
	if _, typ := stream.next(); typ != "hello" {
		t.Fatalf("first event %s", typ)
	}
	opened := time.Now()

	slow, rd := s.dialServe()
	fmt.Fprintf(slow, "POST /v1/workspaces HTTP/1.1\r\nHost: lifeboat\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{", s.userTok)
	res, err := http.ReadResponse(rd, nil)
	must(t, err)
	var ae struct{ Code string }
	must(t, json.NewDecoder(res.Body).Decode(&ae))
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout || ae.Code != "request_timeout" {
		t.Fatalf("slow body: %d %+v", res.StatusCode, ae)
	}
	if rest, err := io.ReadAll(rd); err != nil || len(rest) > 0 {
		t.Fatalf("the slow connection was not closed: %q %v", rest, err)
	}

	idle, rd := s.dialServe()
	fmt.Fprintf(idle, "GET /v1/workspaces HTTP/1.1\r\nHost: lifeboat\r\nAuthorization: Bearer %s\r\n\r\n", s.userTok)
	res, err = http.ReadResponse(rd, nil)
	must(t, err)
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("idle connection's request: %d close=%v %v", res.StatusCode, res.Close, err)
	}
	if _, err := rd.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection was not closed: %v", err)
	}

	// Events keep coming on the stream opened before all this, until it
	// has been open for three write timeouts, and after.
	for n := 0; n < 2 || time.Since(opened) < 900*time.Millisecond; n++ {
		s.park("bot1")
		stream.nextOf("receipt")
	}
	s.stop()
}

// TestServeEventIDsAfterRestart: a client that saw events of one `lifeboat
// serve` and reconnects with its Last-Event-ID to the next process (which
// has numbered as many events or more of its own) is told to resync; it
// does not get that process's later events as if it had missed only those.
func TestServeEventIDsAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, "")
	s.sandbox("bot1", 1)
	s.start()
	s.cliOK("workspace", "add", "bot1", "--provider", "local")
	first := s.openEvents("")
	first.nextOf("hello")
	var last string
	for range 3 {
		s.park("bot1")
		last = first.nextOf("receipt")
	}
	s.stop()
	oldEpoch, oldSeq := epochSeq(t, last)

	s.start()
	for range oldSeq + 2 {
		s.park("bot1")
	}
	again := s.openEvents(last)
	id, typ := again.next()
	epoch, seq := epochSeq(t, id)
	if typ != "resync" || epoch == oldEpoch || seq <= oldSeq {
		t.Fatalf("reconnecting with %s to the next process (which has numbered more events): %s %s, want resync", last, typ, id)
	}
	s.park("bot1")
	if next := again.nextOf("receipt"); !strings.HasPrefix(next, epoch+"-") {
		t.Fatalf("after the resync: %s, want an event of epoch %s", next, epoch)
	}
	s.stop()
}
