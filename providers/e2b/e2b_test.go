package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

// fake replays E2B's documented control-plane answers.
type fake struct {
	mu        sync.Mutex
	sandboxes map[string]sandbox
	next      int
	fault     func(w http.ResponseWriter, r *http.Request) bool // answers instead, when it returns true
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-Key") != "key" {
		http.Error(w, `{"code":401,"message":"Invalid API key"}`, http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	fault := f.fault
	f.mu.Unlock()
	if fault != nil && fault(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id := strings.TrimPrefix(r.URL.Path, "/sandboxes/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v2/sandboxes":
		k, v, _ := strings.Cut(r.URL.Query().Get("metadata"), "=")
		out := []sandbox{}
		for _, sb := range f.sandboxes {
			if sb.Metadata[k] == v {
				out = append(out, sb)
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodPost && r.URL.Path == "/sandboxes":
		var body struct {
			Metadata map[string]string `json:"metadata"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.next++
		sb := sandbox{SandboxID: fmt.Sprintf("sb%04d", f.next), State: "running", Metadata: body.Metadata}
		f.sandboxes[sb.SandboxID] = sb
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(sb)
	case r.Method == http.MethodGet && id != r.URL.Path:
		sb, ok := f.sandboxes[id]
		if !ok {
			http.Error(w, `{"code":404,"message":"sandbox not found"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(sb)
	case r.Method == http.MethodDelete && id != r.URL.Path:
		if _, ok := f.sandboxes[id]; !ok {
			http.Error(w, `{"code":404,"message":"sandbox not found"}`, http.StatusNotFound)
			return
		}
		delete(f.sandboxes, id)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "no route", http.StatusNotImplemented)
	}
}

func start(t *testing.T) (*fake, *httptest.Server) {
	f := &fake{sandboxes: map[string]sandbox{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func TestConformance(t *testing.T) {
	f, srv := start(t)
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) providers.Provider { return New(Config{APIKey: "key", BaseURL: srv.URL}) },
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) {
			f.mu.Lock()
			delete(f.sandboxes, string(id))
			f.mu.Unlock()
		},
		Unreachable: func(t *testing.T) providers.Provider {
			down := httptest.NewServer(http.NotFoundHandler())
			down.Close()
			return New(Config{APIKey: "key", BaseURL: down.URL})
		},
		Absent: "sb-absent",
	})
}

func TestStatusMapping(t *testing.T) {
	f, srv := start(t)
	p := New(Config{APIKey: "key", BaseURL: srv.URL})
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		status     int
		body       string
		retryAfter string
		want       providers.Kind
		wantWait   time.Duration
	}{
		{401, `{"code":401,"message":"Invalid API key"}`, "", providers.KindUnauthorized, 0},
		{403, `{"code":403,"message":"forbidden"}`, "", providers.KindUnauthorized, 0},
		{409, `{"message":"The sandbox is paused","code":409,"canAutoResume":false}`, "", providers.KindConflict, 0},
		{410, `{}`, "", providers.KindConflict, 0},
		{429, `{"code":429,"message":"rate limit"}`, "7", providers.KindRateLimited, 7 * time.Second},
		{429, `{}`, "", providers.KindRateLimited, 0},
		{500, `{}`, "", providers.KindUnavailable, 0},
		{502, `{"sandboxId":"x","message":"The sandbox was not found","code":502}`, "", providers.KindUnavailable, 0},
		{503, `{}`, "", providers.KindUnavailable, 0},
		{400, `{"code":400,"message":"bad"}`, "", providers.KindInvalid, 0},
	}
	for _, c := range cases {
		f.mu.Lock()
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			http.Error(w, c.body, c.status)
			return true
		}
		f.mu.Unlock()
		st, err := p.Inspect(ctx, id)
		if st.State == providers.Missing {
			t.Fatalf("%d answered as Missing", c.status)
		}
		providertest.WantKind(t, fmt.Sprintf("Inspect answered %d", c.status), err, c.want)
		if d, _ := providers.RetryAfter(err); d != c.wantWait {
			t.Fatalf("%d: RetryAfter %v, want %v", c.status, d, c.wantWait)
		}
		_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "other"})
		providertest.WantKind(t, fmt.Sprintf("Create answered %d", c.status), err, c.want)
	}
	f.mu.Lock()
	f.fault = nil
	f.mu.Unlock()
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("after the faults: %+v, %v", st, err)
	}
}

func TestPausedAndTimeout(t *testing.T) {
	f, srv := start(t)
	p := New(Config{APIKey: "key", BaseURL: srv.URL})
	ctx := context.Background()
	id, _ := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	f.mu.Lock()
	sb := f.sandboxes[string(id)]
	sb.State = "paused"
	f.sandboxes[string(id)] = sb
	f.mu.Unlock()
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Stopped {
		t.Fatalf("paused sandbox: %+v, %v", st, err)
	}
	// A control plane that does not answer before the deadline.
	release := make(chan struct{})
	f.mu.Lock()
	f.fault = func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	}
	f.mu.Unlock()
	defer close(release)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := p.Inspect(tctx, id)
	providertest.WantKind(t, "Inspect timing out", err, providers.KindUnavailable)
	_, err = New(Config{APIKey: "wrong", BaseURL: srv.URL}).Inspect(ctx, id)
	providertest.WantKind(t, "Inspect with a wrong key", err, providers.KindUnauthorized)
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error carries the API key: %v", err)
	}
}
