package platformtest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

// LiveEnv returns the values of the environment variables names, or skips
// t naming those that are unset: the live tests run only where the
// platform's credentials are given (never in CI, which has none).
func LiveEnv(t *testing.T, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var missing []string
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			out[n] = v
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.Skipf("live test: set %v to run it against the real platform (it creates and destroys its own sandboxes only)", missing)
	}
	return out
}

// LiveHarness is the conformance harness against a real platform: the
// adapter's own Destroy stands for the platform removing a sandbox, and
// the absent id is a random one (prefix + 16 hex digits) no sandbox has.
// The suite creates its sandboxes with fresh idempotency keys and destroys
// each one when its test ends; it touches no other sandbox.
func LiveHarness(newP func(t *testing.T) providers.Provider, absentPrefix string) providertest.Harness {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return providertest.Harness{
		New: newP,
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) {
			if err := newP(t).Destroy(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		},
		Absent: providers.InstanceID(absentPrefix + hex.EncodeToString(b[:])),
	}
}
