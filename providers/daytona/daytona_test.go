package daytona

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// The contract server is providers/platformtest's Daytona handler, built
// from Daytona's API controllers (daytonaio/daytona
// apps/api/src/sandbox/controllers/sandbox.controller.ts and
// toolbox.deprecated.controller.ts) and its documented error classes.

func start(t *testing.T) (*platformtest.Sandboxes, string, string) {
	s := platformtest.New(t, "dtn_key")
	srv := platformtest.Serve(t, s.Daytona())
	return s, srv.URL, t.TempDir()
}

func newProvider(t *testing.T, base, cache, key string) *Provider {
	p, err := New(Config{APIKey: key, BaseURL: base, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	s, base, cache := start(t)
	providertest.Run(t, providertest.Harness{
		New:              func(t *testing.T) providers.Provider { return newProvider(t, base, cache, "dtn_key") },
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) { s.Remove(string(id)) },
		Unreachable:      func(t *testing.T) providers.Provider { return newProvider(t, platformtest.Down(), cache, "dtn_key") },
		Absent:           "5f0c1e8e-0000-4000-8000-000000000000",
	})
}

// TestStatusMapping: 404 of GET /sandbox/{id} is the only Missing; 502,
// 401, 403 and 429 (with its Retry-After) are typed errors and never
// Missing, on the control plane and the toolbox alike.
func TestStatusMapping(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "dtn_key")
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
		{401, `{"statusCode":401,"message":"Unauthorized","error":"Unauthorized"}`, "", providers.KindUnauthorized, 0},
		{403, `{"statusCode":403,"message":"Forbidden resource","error":"Forbidden"}`, "", providers.KindUnauthorized, 0},
		{429, `{"statusCode":429,"message":"ThrottlerException: Too Many Requests"}`, "30", providers.KindRateLimited, 30 * time.Second},
		{500, `{"statusCode":500,"message":"Internal server error"}`, "", providers.KindUnavailable, 0},
		{502, `<html>502 Bad Gateway</html>`, "", providers.KindUnavailable, 0},
		{503, `{"statusCode":503,"message":"Service Unavailable"}`, "", providers.KindUnavailable, 0},
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
	_, err = newProvider(t, base, cache, "wrong-secret").Inspect(ctx, id)
	providertest.WantKind(t, "Inspect with a wrong key", err, providers.KindUnauthorized)
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("error carries the key: %v", err)
	}
	release := make(chan struct{})
	defer close(release)
	s.SetFault(platformtest.Hang(release))
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = p.Inspect(tctx, id)
	providertest.WantKind(t, "Inspect timing out", err, providers.KindUnavailable)
}

// TestStopKeepsFiles: Stop labels and stops the sandbox; Inspect says
// Stopped by Lifeboat; the toolbox of a stopped sandbox answers 400 ("Is
// the Sandbox started?"), a conflict, never Missing; the files are back
// once it is started again.
func TestStopKeepsFiles(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "dtn_key")
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	providertest.Tree(t, src, "kept")
	staging, err := p.WriteFiles(ctx, id, src)
	if err == nil {
		err = p.Switch(ctx, id, staging)
	}
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Stop(ctx, id); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	}
	st, err := p.Inspect(ctx, id)
	if err != nil || st.State != providers.Stopped || !strings.Contains(st.Detail, "stopped by Lifeboat at") {
		t.Fatalf("Inspect after Stop: %+v, %v", st, err)
	}
	_, err = p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles of a stopped sandbox", err, providers.KindConflict)
	providertest.WantKind(t, "Stop of an absent sandbox", p.Stop(ctx, "absent"), providers.KindConflict)
	s.Update(string(id), func(b *platformtest.Box) { b.State = "started" })
	f, err := p.ReadFiles(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := providertest.Listing(t, f.Dir()), providertest.Listing(t, src); got != want {
		t.Fatalf("after a stop and start:\n%s\nwant:\n%s", got, want)
	}
}

func TestQuoteRoundTrip(t *testing.T) {
	argv := []string{"sh", "-c", `echo "$1" 'x'`, "it's", "", "a b\nc", `\back`}
	got, err := platformtest.ShellWords(Quote(argv))
	if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", argv) {
		t.Fatalf("ShellWords(Quote(%q)) = %q, %v", argv, got, err)
	}
}
