package cloudflare

import (
	"context"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// The contract server is providers/platformtest's Cloudflare handler: the
// bridge routes docs/providers.md defines after the Cloudflare Sandbox SDK
// (developers.cloudflare.com/sandbox: getSandbox, exec, writeFile,
// readFile, destroy, createBackup, restoreBackup; errors per its 1.0
// errors page: CONTAINER_UNAVAILABLE with retryAfterMs).

func start(t *testing.T) (*platformtest.Sandboxes, string, string) {
	s := platformtest.New(t, "bridge-token")
	srv := platformtest.Serve(t, s.Cloudflare())
	return s, srv.URL, t.TempDir()
}

func newProvider(t *testing.T, base, cache, token string) *Provider {
	p, err := New(Config{Token: token, BaseURL: base, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	s, base, cache := start(t)
	providertest.Run(t, s.Harness(base, "ws-absent", "/.lifeboat-workspace/staging", func(t *testing.T, base string) providers.Provider {
		return newProvider(t, base, cache, "bridge-token")
	}))
}

// TestStatusMapping: the bridge's 404 is the only Missing; 502, 503
// CONTAINER_UNAVAILABLE, 401, 403 and 429 (with its Retry-After) are
// typed errors and never Missing.
func TestStatusMapping(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "bridge-token")
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	cases := append(platformtest.CommonStatuses(`{"error":{"code":"UNAUTHORIZED","message":"bad bridge token"}}`, `{"error":{"code":"RATE_LIMITED"}}`),
		platformtest.StatusCase{Status: 503, Body: `{"error":{"code":"CONTAINER_UNAVAILABLE","message":"container_starting","retryAfterMs":2000}}`,
			RetryAfter: "2", Want: providers.KindUnavailable})
	platformtest.CheckStatuses(t, s, p, id, cases, map[string]func() error{
		"ReadFiles":  func() error { _, err := p.ReadFiles(ctx, id); return err },
		"Checkpoint": func() error { _, err := p.Checkpoint(ctx, id); return err },
		"Create":     func() error { _, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "other"}); return err },
	}, newProvider(t, base, cache, "wrong-secret"))
}

// TestLostDiskRolledBack: a container that restarted without its disk is
// Missing to Inspect and a conflict to the data plane; rolling back to a
// backup restores the workspace into the same sandbox.
func TestLostDiskRolledBack(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "bridge-token")
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	providertest.Tree(t, src, "backed-up")
	staging, err := p.WriteFiles(ctx, id, src)
	if err == nil {
		err = p.Switch(ctx, id, staging)
	}
	if err != nil {
		t.Fatal(err)
	}
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Wipe(string(id)); err != nil {
		t.Fatal(err)
	}
	s.Update(string(id), func(b *platformtest.Box) { b.State = "lost" })
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect of a lost sandbox: %+v, %v", st, err)
	}
	_, err = p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles of a lost sandbox", err, providers.KindConflict)
	to, err := p.Rollback(ctx, id, cp)
	if err != nil || to != id {
		t.Fatalf("Rollback = %s, %v", to, err)
	}
	f, err := p.ReadFiles(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := providertest.Listing(t, f.Dir()), providertest.Listing(t, src); got != want {
		t.Fatalf("after the rollback:\n%s\nwant:\n%s", got, want)
	}
}
