package daytona

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// The contract server is providers/platformtest's Daytona handler, built
// from Daytona's API controllers (daytonaio/daytona
// apps/api/src/sandbox/controllers/sandbox.controller.ts and
// toolbox.deprecated.controller.ts) and its documented error classes.

func start(t *testing.T) (*platformtest.Sandboxes, string, string) {
	return platformtest.Start(t, "dtn_key", (*platformtest.Sandboxes).Daytona)
}

func newProvider(t *testing.T, base, cache, key string) *Provider {
	return providertest.MustNew(t, New, Config{APIKey: key, BaseURL: base, CacheDir: cache})
}

func TestConformance(t *testing.T) {
	s, base, cache := start(t)
	providertest.Run(t, s.Harness(base, "5f0c1e8e-0000-4000-8000-000000000000", "/home/daytona/.lifeboat-workspace/staging", func(t *testing.T, base string) providers.Provider {
		return newProvider(t, base, cache, "dtn_key")
	}))
}

// TestStatusMapping: 404 of GET /sandbox/{id} is the only Missing; 502,
// 401, 403 and 429 (with its Retry-After) are typed errors and never
// Missing, on the control plane and the toolbox alike.
func TestStatusMapping(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "dtn_key")
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	cases := platformtest.CommonStatuses(`{"statusCode":401,"message":"Unauthorized","error":"Unauthorized"}`,
		`{"statusCode":429,"message":"ThrottlerException: Too Many Requests"}`)
	platformtest.CheckStatuses(t, s, p, id, cases, map[string]func() error{
		"Stop": func() error { return p.Stop(ctx, id) },
	}, newProvider(t, base, cache, "wrong-secret"))
}

// TestStopKeepsFiles: Stop labels and stops the sandbox; Inspect says
// Stopped by Lifeboat; the toolbox of a stopped sandbox answers 400 ("Is
// the Sandbox started?"), a conflict, never Missing; the files are back
// once it is started again.
func TestStopKeepsFiles(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "dtn_key")
	ctx := context.Background()
	id, src := platformtest.NewWithTree(t, p, "k", "kept")
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
	platformtest.WantTree(t, p, id, src, "after a stop and start")
}

func TestQuoteRoundTrip(t *testing.T) {
	argv := []string{"sh", "-c", `echo "$1" 'x'`, "it's", "", "a b\nc", `\back`}
	got, err := platformtest.ShellWords(Quote(argv))
	if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", argv) {
		t.Fatalf("ShellWords(Quote(%q)) = %q, %v", argv, got, err)
	}
}

// TestLive runs the conformance suite against Daytona itself when
// LIFEBOAT_LIVE_DAYTONA_API_KEY is set (LIFEBOAT_LIVE_DAYTONA_API_URL for
// another API than Daytona's cloud). Never run for this repository so
// far: no credentials.
func TestLive(t *testing.T) {
	env := platformtest.LiveEnv(t, "LIFEBOAT_LIVE_DAYTONA_API_KEY")
	cache := t.TempDir()
	providertest.Run(t, platformtest.LiveHarness(func(t *testing.T) providers.Provider {
		return providertest.MustNew(t, New, Config{APIKey: env["LIFEBOAT_LIVE_DAYTONA_API_KEY"], BaseURL: os.Getenv("LIFEBOAT_LIVE_DAYTONA_API_URL"), CacheDir: cache})
	}, "00000000-0000-4000-8000-"))
}

// TestLiveHarness runs the live test's harness against the contract
// server, so the harness TestLive would use is itself tested.
func TestLiveHarness(t *testing.T) {
	_, base, cache := start(t)
	providertest.Run(t, platformtest.LiveHarness(func(t *testing.T) providers.Provider { return newProvider(t, base, cache, "dtn_key") },
		"00000000-0000-4000-8000-"))
}
