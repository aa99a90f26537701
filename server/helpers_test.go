package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"lifeboat/internal/repotest"
	"lifeboat/internal/ssetest"
	"lifeboat/internal/storetest"
	"lifeboat/providers"
	localprov "lifeboat/providers/local"
	"lifeboat/recovery"
	"lifeboat/repo"
)

const (
	userToken     = "user-token-3f9a1c"
	operatorToken = "operator-token-77b2e0"
)

// env is a server over a real lifecycle (a real repository, the local
// provider, a bbolt state store) and a fake recovery service.
type env struct {
	t    *testing.T
	srv  *Server
	http *httptest.Server
	rec  *fakeRecovery
	life *recovery.Lifecycle
	root string // the local provider's root
	logs *syncBuffer
	repo *repo.Repository
	dir  string // the state store's directory
	rdir string // the repository's directory
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newEnv(t *testing.T) *env { t.Helper(); return newEnvWith(t, nil) }

// newEnvWith is newEnv whose server uses the recovery service rec makes
// (nil: the fake).
func newEnvWith(t *testing.T, rec func(e *env) RecoveryService) *env {
	t.Helper()
	return newEnvConfig(t, rec, nil)
}

// newEnvConfig is newEnvWith whose server Config set changes first. The
// server is served as HTTPServer makes it (its timeouts).
func newEnvConfig(t *testing.T, rec func(e *env) RecoveryService, set func(*Config)) *env {
	t.Helper()
	s := storetest.Local(t)
	r, dir := repotest.New(t, repotest.Options{Store: s}), s.Location

	e := &env{t: t, root: t.TempDir(), logs: &syncBuffer{}, repo: r, dir: t.TempDir(), rdir: dir}
	st, err := recovery.OpenStore(e.dir)
	must(t, err)
	t.Cleanup(func() { _ = st.Close() })
	events := NewEvents()
	e.life, err = recovery.New(recovery.Config{Store: st, Capturer: &recovery.RepoCapturer{Repo: r},
		Providers: []providers.Provider{localprov.New(e.root)}, OnReceipt: events.Receipt})
	must(t, err)
	t.Cleanup(e.life.Close)
	e.rec = newFakeRecovery(e.life)
	tokens, err := ParseTokens("test tokens", []byte("user "+HashToken(userToken)+" inbox\noperator "+HashToken(operatorToken)+" ops-alice\n"))
	must(t, err)
	var rs RecoveryService = e.rec
	if rec != nil {
		rs = rec(e)
	}
	cfg := Config{Recovery: rs, Tokens: tokens, Events: events,
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if set != nil {
		set(&cfg)
	}
	e.srv, err = New(cfg)
	must(t, err)
	e.http = httptest.NewUnstartedServer(e.srv.Handler())
	e.http.Config = e.srv.HTTPServer()
	e.http.Start()
	t.Cleanup(func() { e.srv.Close(); e.http.Close() })
	return e
}

// newLostEnv is newEnv with workspace w1 lost and checkpoint cp-good on
// offer, and an empty local instance inst-a to register a workspace on.
func newLostEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	must(t, os.MkdirAll(filepath.Join(e.root, "inst-a"), 0o755))
	e.workspace("w1", map[string]string{"a": "a"})
	e.rec.set(lost("w1", 1, "cp-good", time.Now()))
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// workspace registers workspace id on a local instance holding files.
func (e *env) workspace(id string, files map[string]string) {
	e.t.Helper()
	inst := "inst-" + id
	for name, body := range files {
		p := filepath.Join(e.root, inst, name)
		must(e.t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(e.t, os.WriteFile(p, []byte(body), 0o644))
	}
	must(e.t, e.life.Store().AddWorkspace(recovery.Workspace{ID: id, Provider: localprov.Name, Instance: providers.InstanceID(inst), Created: time.Now()}))
}

// do sends a request with the token (none when "") and body as JSON (none
// when nil), and returns the status and body.
func (e *env) do(method, path, tok string, body any, header ...string) (int, []byte, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must(e.t, err)
		rd = bytes.NewReader(b)
	}
	return e.send(method, path, tok, rd, header...)
}

// send sends a request with the token (none when ""), the body as it is
// and the header's name, value pairs, and returns the status and body.
func (e *env) send(method, path, tok string, body io.Reader, header ...string) (int, []byte, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, body)
	must(e.t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.http.Client().Do(req)
	must(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(e.t, err)
	return res.StatusCode, b, res.Header
}

// ok sends a request that must answer want, and decodes the body into v.
func (e *env) ok(want int, method, path, tok string, body, v any, header ...string) {
	e.t.Helper()
	code, b, _ := e.do(method, path, tok, body, header...)
	if code != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, b)
	}
	if v != nil {
		must(e.t, json.Unmarshal(b, v))
	}
}

// fails sends a request that must fail with status and code.
func (e *env) fails(status int, code, method, path, tok string, body any, header ...string) apiError {
	e.t.Helper()
	got, b, _ := e.do(method, path, tok, body, header...)
	var ae apiError
	if err := json.Unmarshal(b, &ae); err != nil {
		e.t.Fatalf("%s %s: the error body is not JSON: %s", method, path, b)
	}
	if got != status || ae.Code != code || ae.Message == "" {
		e.t.Fatalf("%s %s: got %d %q (%s), want %d %q", method, path, got, ae.Code, ae.Message, status, code)
	}
	return ae
}

// sseClient reads an event stream.
type sseClient struct {
	res *http.Response
	rd  *bufio.Reader
}

func (e *env) stream(tok, lastID string) *sseClient {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.http.URL+"/v1/events", nil)
	must(e.t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := e.http.Client().Do(req)
	must(e.t, err)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		e.t.Fatalf("event stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	e.t.Cleanup(func() { res.Body.Close() })
	return &sseClient{res: res, rd: bufio.NewReader(res.Body)}
}

// next reads the next event (comments and retry lines skipped); io.EOF
// when the stream ended.
func (c *sseClient) next() (ssetest.Event, error) { return ssetest.ReadEvent(c.rd) }

func (c *sseClient) must(t *testing.T, typ string) ssetest.Event {
	t.Helper()
	ev, err := c.next()
	if err != nil {
		t.Fatalf("event stream: waiting for %s: %v", typ, err)
	}
	if ev.Type != typ {
		t.Fatalf("event stream: got %s (%s), want %s", ev.Type, ev.Data, typ)
	}
	return ev
}

// mustAfter is must, passing over events of the types skip first: events
// published before the stream opened, relayed to it after, may come first.
func (c *sseClient) mustAfter(t *testing.T, typ string, skip ...string) ssetest.Event {
	t.Helper()
	for {
		ev, err := c.next()
		if err != nil {
			t.Fatalf("event stream: waiting for %s: %v", typ, err)
		}
		if ev.Type == typ {
			return ev
		}
		if !slices.Contains(skip, ev.Type) {
			t.Fatalf("event stream: got %s (%s), want %s", ev.Type, ev.Data, typ)
		}
	}
}
