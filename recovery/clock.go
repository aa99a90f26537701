package recovery

import "lifeboat/recovery/dirlock"

// Clock is the lifecycle's time source; tests inject a fake one. It is
// the directory locks' clock: the service hands the lifecycle's clock to
// its locks, so their waits and copy-back retries run on the same time.
type Clock = dirlock.Clock

// SystemClock is the real clock.
type SystemClock = dirlock.RealClock
