package s3test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Action is what a Fault does to the requests it matches.
type Action int

// Fault actions.
const (
	// SlowDown answers 503 with the S3 error code SlowDown, without
	// forwarding the request.
	SlowDown Action = iota + 1
	// LoseResponse forwards the request, then drops the connection
	// instead of answering: the server did the work, the client never
	// hears of it (and retries).
	LoseResponse
	// ResetBody forwards the request and sends the status, the headers
	// and half of the body, then drops the connection.
	ResetBody
	// SlowBody forwards the request and trickles the answer's body in
	// 16 KiB pieces, Delay apart.
	SlowBody
)

func (a Action) String() string {
	switch a {
	case SlowDown:
		return "SlowDown"
	case LoseResponse:
		return "LoseResponse"
	case ResetBody:
		return "ResetBody"
	case SlowBody:
		return "SlowBody"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Fault is one planned fault of a Proxy.
type Fault struct {
	Method string // "" matches any
	Path   string // a substring of the request path (/BUCKET/KEY); "" matches any
	Skip   int    // matching requests let through before the fault fires
	Times  int    // how many matching requests it hits; 0: every one
	Action Action
	Delay  time.Duration // SlowBody: between pieces
	// Fired, when not nil, gets a value (without blocking) each time the
	// fault fires, before the request is forwarded.
	Fired chan struct{}

	seen, hits int
}

// Exchange is one request the proxy forwarded and the status the server
// answered (also when the client never got the answer).
type Exchange struct {
	Method, Path string
	Status       int
	Fault        Action    // 0 when none fired
	Done         time.Time // when the answer was sent
}

// Proxy is an HTTP reverse proxy in front of a Server that injects
// planned faults (kopia's internal/fault, over HTTP).
type Proxy struct {
	URL    string // http://127.0.0.1:PORT
	target string
	tr     *http.Transport

	mu     sync.Mutex
	faults []*Fault
	log    []Exchange
}

// Proxy starts a fault proxy in front of s, closed when t ends.
func (s *Server) Proxy(t testing.TB) *Proxy {
	p := &Proxy{target: s.Addr, tr: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}
	srv := httptest.NewServer(p)
	p.URL = srv.URL
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		p.tr.CloseIdleConnections()
	})
	return p
}

// Location is the repository location of prefix in bucket, through the
// proxy.
func (p *Proxy) Location(bucket, prefix string) string {
	return "s3:" + p.URL + "/" + strings.TrimSuffix(bucket+"/"+prefix, "/")
}

// Add plans f and returns it (Hits reads its count).
func (p *Proxy) Add(f Fault) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	nf := f
	p.faults = append(p.faults, &nf)
	return &nf
}

// Clear drops every planned fault.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// Hits is how many requests f hit.
func (p *Proxy) Hits(f *Fault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return f.hits
}

// Log returns the exchanges so far.
func (p *Proxy) Log() []Exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Exchange(nil), p.log...)
}

// match returns the fault that fires for r, counting it, or nil.
func (p *Proxy) match(r *http.Request) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if (f.Method != "" && f.Method != r.Method) || !strings.Contains(r.URL.Path, f.Path) {
			continue
		}
		f.seen++
		if f.seen <= f.Skip || (f.Times > 0 && f.hits >= f.Times) {
			continue
		}
		f.hits++
		if f.Fired != nil {
			select {
			case f.Fired <- struct{}{}:
			default:
			}
		}
		return f
	}
	return nil
}

func (p *Proxy) record(r *http.Request, status int, a Action) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, Exchange{Method: r.Method, Path: r.URL.Path, Status: status, Fault: a, Done: time.Now()})
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := p.match(r)
	var action Action
	var delay time.Duration
	if f != nil {
		action, delay = f.Action, f.Delay
	}
	if action == SlowDown {
		_, _ = io.Copy(io.Discard, r.Body) // answer after the body, as a server would
		p.record(r, http.StatusServiceUnavailable, action)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><Resource>%s</Resource><RequestId>fault-proxy</RequestId></Error>`, r.URL.Path)
		}
		return
	}
	// The body is read whole first and sent in one go: versitygw answers
	// a refused conditional PUT (412) without reading the body and closes
	// the connection, and a proxy still writing the body then meets a
	// reset instead of the answer (it answers 502; the client retries).
	body, err := io.ReadAll(r.Body)
	if err != nil {
		p.record(r, http.StatusBadRequest, action)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.URL.Scheme, out.URL.Host, out.RequestURI = "http", p.target, ""
	out.Host = r.Host // signed by the client
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		p.record(r, http.StatusBadGateway, action)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	p.record(r, resp.StatusCode, action)
	if action == LoseResponse {
		_, _ = io.Copy(io.Discard, resp.Body)
		panic(http.ErrAbortHandler) // the connection closes with no answer
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	switch action {
	case ResetBody:
		half := resp.ContentLength / 2
		_, _ = io.CopyN(w, resp.Body, half)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case SlowBody:
		buf := make([]byte, 16<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(delay): // the simulated slow network
				case <-r.Context().Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	default:
		_, _ = io.Copy(w, resp.Body)
	}
}
