package vercel

import (
	"context"
	"net/http"
	"os"
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
	return platformtest.Start(t, "tok", func(s *platformtest.Sandboxes) http.Handler { return s.Vercel("team_1") })
}

func newProvider(t *testing.T, base, cache, token string) *Provider {
	return providertest.MustNew(t, New, Config{Token: token, TeamID: "team_1", ProjectID: "prj_1", BaseURL: base, CacheDir: cache})
}

func TestConformance(t *testing.T) {
	s, base, cache := start(t)
	providertest.Run(t, s.Harness(base, "sbx_absent", "/vercel/sandbox/.lifeboat-workspace/staging", func(t *testing.T, base string) providers.Provider { return newProvider(t, base, cache, "tok") }))
}

// TestStatusMapping: 404 of the control plane is the only Missing; 502,
// 401, 403 and 429 (with its Retry-After) are typed errors and never
// Missing, on the control plane and the data plane alike.
func TestStatusMapping(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "tok")
	id := providertest.MustCreate(t, p, "k")
	cases := append(platformtest.CommonStatuses(`{"error":{"code":"forbidden","message":"Not authorized"}}`, `{"error":{"code":"rate_limited","message":"Too many requests"}}`),
		platformtest.StatusCase{Status: 400, Body: `{"error":{"code":"bad_request"}}`, Want: providers.KindInvalid})
	platformtest.CheckStatuses(t, s, p, id, cases, nil, newProvider(t, base, cache, "wrong-secret"))
}

// TestStoppedIsMissing: a stopped Vercel sandbox has lost its filesystem,
// which its control plane confirms; its data plane answers 410, which is
// a conflict and never Missing by itself.
func TestStoppedIsMissing(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "tok")
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	s.Update(string(id), func(b *platformtest.Box) { b.State = "stopped" })
	_, err := p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles of a stopped sandbox (410)", err, providers.KindConflict)
	st, err := p.Inspect(ctx, id)
	if err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect of a stopped sandbox: %+v, %v", st, err)
	}
	t.Log(st.Detail)
	if n := s.Calls("POST /v1/sandboxes"); n != 1 {
		t.Fatalf("%d sandboxes created, want 1", n)
	}
}

// TestDestroyDropsMirror: Destroy removes the instance's local mirror,
// but not while a ReadFiles still holds it.
func TestDestroyDropsMirror(t *testing.T) {
	_, base, cache := start(t)
	p := newProvider(t, base, cache, "tok")
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	f, err := p.ReadFiles(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.Dir()); err != nil {
		t.Fatalf("Destroy removed a mirror still held: %v", err)
	}
	f.Close()
	other, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	f, err = p.ReadFiles(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	dir := f.Dir()
	f.Close()
	if err := p.Destroy(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("mirror %s still there after Destroy: %v", dir, err)
	}
}

// TestLive runs the conformance suite against Vercel itself when
// LIFEBOAT_LIVE_VERCEL_TOKEN and LIFEBOAT_LIVE_VERCEL_PROJECT are set
// (LIFEBOAT_LIVE_VERCEL_TEAM too for a team's token). Never run for this
// repository so far: no credentials.
func TestLive(t *testing.T) {
	env := platformtest.LiveEnv(t, "LIFEBOAT_LIVE_VERCEL_TOKEN", "LIFEBOAT_LIVE_VERCEL_PROJECT")
	cache := t.TempDir()
	providertest.Run(t, platformtest.LiveHarness(func(t *testing.T) providers.Provider {
		return providertest.MustNew(t, New, Config{Token: env["LIFEBOAT_LIVE_VERCEL_TOKEN"], ProjectID: env["LIFEBOAT_LIVE_VERCEL_PROJECT"],
			TeamID: os.Getenv("LIFEBOAT_LIVE_VERCEL_TEAM"), CacheDir: cache, SandboxTimeout: 10 * time.Minute})
	}, "sbx_lifeboatabsent"))
}
