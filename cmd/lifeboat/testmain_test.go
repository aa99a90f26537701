package main

import (
	"os"
	"testing"

	"lifeboat/profile/profiletest"
	"lifeboat/recovery/statedb/pgtest"
)

// TestMain lets this test binary stand in for the browser of the
// paused-profile tests (profiletest.Main returns at once unless this
// process was started as one) and stops the PostgreSQL cluster the
// tests may have started. The commands it runs keep no key in the
// user's kernel keyring (a few hundred repositories would fill a user's
// quota there for ten minutes), except where a test asks with --key-cache.
func TestMain(m *testing.M) {
	os.Setenv(keyCacheEnv, "0")
	profiletest.Main(m, pgtest.Stop)
}
