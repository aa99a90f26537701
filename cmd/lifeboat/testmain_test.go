package main

import (
	"testing"

	"lifeboat/profile/profiletest"
	"lifeboat/recovery/statedb/pgtest"
)

// TestMain lets this test binary stand in for the browser of the
// paused-profile tests (profiletest.Main returns at once unless this
// process was started as one) and stops the PostgreSQL cluster the
// tests may have started.
func TestMain(m *testing.M) {
	profiletest.Main(m, pgtest.Stop)
}
