package main

// The test hooks: environment variables that make a real lifeboat crash or
// stop at chosen points, so tests can kill it there. They work only in a
// binary built with `-tags lifeboat_testhooks` (crash_hooks.go); a release
// build (crash_nohooks.go) ignores them.
const (
	// crashEnv: when set to N, the process kills itself with SIGKILL
	// right after its Nth successful save to the repository, so tests can
	// crash a real lifeboat at every write boundary.
	crashEnv = "LIFEBOAT_TEST_CRASH_AFTER_SAVES"
	// crashRemoveEnv does the same after the Nth successful remove
	// (prune's delete phase).
	crashRemoveEnv = "LIFEBOAT_TEST_CRASH_AFTER_REMOVES"
	// recoveryStopEnv: a hook of `lifeboat serve`: when set to a recovery
	// crash point ("before:creating", "after:switching", ...), the
	// recovery operation that reaches it prints "at <point>" to stderr and
	// blocks there, so a test can kill the server at every step, or stop
	// it (SIGSTOP) and let it go on (SIGCONT) from there.
	recoveryStopEnv = "LIFEBOAT_TEST_RECOVERY_STOP_AT"
	// pruneClockEnv shifts a two-phase prune's clock by a duration, so
	// that a test sees condemnations ripen without waiting for the margin.
	pruneClockEnv = "LIFEBOAT_TEST_PRUNE_CLOCK_OFFSET"
)
