package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live    uint64
		roots   uint64
		percent int
		floor   uint64
		want    int
	}{
		{0, 0, 25, 32 * mib, 800},         // before the first collection: 4 MiB x 8 = 32 MiB
		{0, 0, 25, 0, 25},                 // no floor
		{0, 0, 25, mib, 25},               // a floor under the runtime's minimum
		{8 * mib, 0, 25, 32 * mib, 300},   // 8 MiB live: 32 MiB is 300% more
		{16 * mib, 0, 25, 32 * mib, 100},  // 16 MiB live: 100% more
		{28 * mib, 0, 25, 36 * mib, 28},   // just under: a little more
		{26 * mib, 0, 25, 32 * mib, 25},   // 26 x 1.25 = 32.5 MiB, above the floor
		{100 * mib, 0, 25, 32 * mib, 25},  // a large heap keeps GOGC
		{100 * mib, 0, 25, 100 * mib, 25}, // live at the floor
		{1, 0, 25, 32 * mib, 800},         // a byte live: the minimum heap, 4 MiB x 8, is the floor
		{0, 0, 25, 1 << 40, maxPercent},   // a floor beyond reason: bounded too
	} {
		if got := Percent(c.live, c.roots, c.percent, c.floor); got != c.want {
			t.Errorf("Percent(%d, %d, %d, %d) = %d, want %d", c.live, c.roots, c.percent, c.floor, got, c.want)
		}
	}
}

// With a floor, a program that allocates much and keeps little is
// collected far less often than at the bare GOGC; stop puts GOGC back.
func TestFloorCutsCollections(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	const mib = 1 << 20
	churn := func() uint32 { // allocates 256 MiB, about 1 MiB live at a time
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.NumGC
		var keep [][]byte
		for i := range 256 * 16 {
			keep = append(keep, make([]byte, 64<<10))
			if len(keep) == 16 {
				keep = keep[:0]
			}
			_ = i
		}
		runtime.ReadMemStats(&ms)
		return ms.NumGC - before
	}
	debug.SetGCPercent(25)
	bare := churn()
	stop := Start(25, 64*mib)
	floored := churn()
	stop()
	if got := debug.SetGCPercent(25); got != 25 {
		t.Errorf("after stop, GOGC is %d, want 25", got)
	}
	t.Logf("collections while allocating 256 MiB with about 1 MiB live: %d at GOGC 25, %d with a 64 MiB floor", bare, floored)
	if floored*4 > bare {
		t.Errorf("with a 64 MiB floor: %d collections, want under a quarter of the %d without", floored, bare)
	}
}

// A stop that runs while a retune is under way (between its check and its
// setting GOGC) still leaves GOGC at the percent given, and ends the
// retuning.
func TestStopDuringRetune(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	tn := newTuner(25, 1<<40) // any retune would set maxPercent
	tn.beforeSet = tn.stop
	if tn.retune() {
		t.Error("retune goes on after a stop")
	}
	if got := debug.SetGCPercent(100); got != 25 {
		t.Errorf("after a stop during a retune, GOGC is %d, want 25", got)
	}
	tn.beforeSet = nil
	if tn.retune() {
		t.Error("retune goes on after a stop")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("a retune after stop set GOGC to %d", got)
	}
}
