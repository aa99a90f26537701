package vercel

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// The contract server is providers/platformtest's Vercel handler, built
// from the Vercel Sandbox SDK's API client (vercel/sandbox
// packages/vercel-sandbox/src/api-client) and vercel.com/docs/errors.

func start(t *testing.T) (*platformtest.Sandboxes, string, string) {
	s := platformtest.New(t, "tok")
	srv := platformtest.Serve(t, s.Vercel("team_1"))
	return s, srv.URL, t.TempDir()
}

func newProvider(t *testing.T, base, cache, token string) *Provider {
	p, err := New(Config{Token: token, TeamID: "team_1", ProjectID: "prj_1", BaseURL: base, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	s, base, cache := start(t)
	providertest.Run(t, providertest.Harness{
		New:              func(t *testing.T) providers.Provider { return newProvider(t, base, cache, "tok") },
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) { s.Remove(string(id)) },
		Unreachable:      func(t *testing.T) providers.Provider { return newProvider(t, platformtest.Down(), cache, "tok") },
		Absent:           "sbx_absent",
	})
}

// TestStatusMapping: 404 of the control plane is the only Missing; 502,
// 401, 403 and 429 (with its Retry-After) are typed errors and never
// Missing, on the control plane and the data plane alike.
func TestStatusMapping(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "tok")
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
		{401, `{"error":{"code":"unauthorized","message":"Not authenticated"}}`, "", providers.KindUnauthorized, 0},
		{403, `{"error":{"code":"forbidden","message":"Not authorized"}}`, "", providers.KindUnauthorized, 0},
		{429, `{"error":{"code":"rate_limited","message":"Too many requests"}}`, "12", providers.KindRateLimited, 12 * time.Second},
		{500, `{"error":{"code":"internal_server_error"}}`, "", providers.KindUnavailable, 0},
		{502, `<html>Bad Gateway</html>`, "", providers.KindUnavailable, 0},
		{503, `{}`, "", providers.KindUnavailable, 0},
		{400, `{"error":{"code":"bad_request"}}`, "", providers.KindInvalid, 0},
	}
	for _, c := range cases {
		s.SetFault(platformtest.Status(c.status, c.body, c.retryAfter))
		st, err := p.Inspect(ctx, id)
		if st.State == providers.Missing {
			t.Fatalf("%d answered as Missing", c.status)
		}
		providertest.WantKind(t, fmt.Sprintf("Inspect answered %d", c.status), err, c.want)
		if d, _ := providers.RetryAfter(err); d != c.wantWait {
			t.Fatalf("%d: RetryAfter %v, want %v", c.status, d, c.wantWait)
		}
		_, err = p.ReadFiles(ctx, id)
		providertest.WantKind(t, fmt.Sprintf("ReadFiles answered %d", c.status), err, c.want)
		_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "other"})
		providertest.WantKind(t, fmt.Sprintf("Create answered %d", c.status), err, c.want)
	}
	s.SetFault(nil)
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("after the faults: %+v, %v", st, err)
	}
	// A wrong token: the server's own 403, never echoing the token.
	_, err = newProvider(t, base, cache, "wrong-secret").Inspect(ctx, id)
	providertest.WantKind(t, "Inspect with a wrong token", err, providers.KindUnauthorized)
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("error carries the token: %v", err)
	}
	// A control plane that does not answer before the deadline.
	release := make(chan struct{})
	defer close(release)
	s.SetFault(platformtest.Hang(release))
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = p.Inspect(tctx, id)
	providertest.WantKind(t, "Inspect timing out", err, providers.KindUnavailable)
}

// TestStoppedIsMissing: a stopped Vercel sandbox has lost its filesystem,
// which its control plane confirms; its data plane answers 410, which is
// a conflict and never Missing by itself.
func TestStoppedIsMissing(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "tok")
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	s.Update(string(id), func(b *platformtest.Box) { b.State = "stopped" })
	_, err = p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles of a stopped sandbox (410)", err, providers.KindConflict)
	st, err := p.Inspect(ctx, id)
	if err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect of a stopped sandbox: %+v, %v", st, err)
	}
	t.Log(st.Detail)
	if n := s.Calls("POST /v1/sandboxes"); n != 1 {
		t.Fatalf("%d sandboxes created, want 1", n)
	}
	_ = http.StatusGone
}
