package main

import (
	"testing"

	"lifeboat/bench"
	"lifeboat/profile/profiletest"
	"lifeboat/recovery/statedb/pgtest"
)

// TestMain lets this test binary stand in for the helpers tests start:
// the bench trampoline (`lifeboat bench` run in-process measures its
// children through it) and the stand-in browser of the paused-profile
// tests. Each returns at once unless this process was started as one.
func TestMain(m *testing.M) {
	bench.Trampoline()
	profiletest.Main(m, pgtest.Stop)
}
