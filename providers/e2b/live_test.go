package e2b

import (
	"os"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// TestLive runs the conformance suite against the real E2B platform when
// LIFEBOAT_LIVE_E2B_API_KEY is set (LIFEBOAT_LIVE_E2B_TEMPLATE names the
// template, which needs GNU tar; default E2B's base). It creates its own
// sandboxes and destroys each one; it touches no other.
func TestLive(t *testing.T) {
	env := platformtest.LiveEnv(t, "LIFEBOAT_LIVE_E2B_API_KEY")
	cache := t.TempDir()
	providertest.Run(t, platformtest.LiveHarness(func(t *testing.T) providers.Provider {
		return providertest.MustNew(t, New, Config{APIKey: env["LIFEBOAT_LIVE_E2B_API_KEY"], Template: os.Getenv("LIFEBOAT_LIVE_E2B_TEMPLATE"),
			SandboxTimeout: 600, CacheDir: cache})
	}, "ilifeboatabsent"))
}
