// Package gcfloor runs the garbage collector at a low GOGC without letting
// a small heap be collected over and over.
//
// Lifeboat's commands keep their memory low with GOGC 25: a collection
// once the heap has grown by a quarter. That suits a large heap, but the
// runtime's heap goal is a quarter more than what is live however little
// that is, so a command whose live heap is a few MiB (an unchanged
// re-capture walks 100,000 files with about 12 MiB live) collects after
// every MiB or two it allocates, and spends a third of its time marking.
// A floor on the heap goal fixes that: after each collection, GOGC is set
// for the next one so that its goal is at least the floor.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Start sets GOGC to percent, raised whenever percent of the live heap
// would put the heap goal below floor bytes, and keeps it so after every
// collection until stop is called. Stop leaves GOGC at percent.
func Start(percent int, floor uint64) (stop func()) {
	t := newTuner(percent, floor)
	debug.SetGCPercent(Percent(0, 0, percent, floor))
	t.arm()
	return t.stop
}

func newTuner(percent int, floor uint64) *tuner {
	return &tuner{percent: percent, floor: floor,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/globals:bytes"}, {Name: "/gc/scan/stack:bytes"}}}
}

// stop ends the retuning and sets GOGC to percent.
func (t *tuner) stop() {
	t.stopped.Store(true)
	debug.SetGCPercent(t.percent)
}

// runtimeMinHeap is the heap goal before the first collection at GOGC 100
// (the runtime scales it by GOGC).
const runtimeMinHeap = 4 << 20

// Percent is the GOGC that puts the heap goal at floor bytes, or percent
// when that gives more, for a live heap of live bytes and roots bytes of
// stacks and globals (live 0: before the first collection). The runtime's
// goal is live + (live + roots) * GOGC / 100, but never below its minimum
// heap, 4 MiB * GOGC / 100, which a tiny live heap would otherwise push
// far past the floor.
func Percent(live, roots uint64, percent int, floor uint64) int {
	atMin := floor * 100 / runtimeMinHeap // the GOGC whose minimum heap is floor
	if live+(live+roots)*uint64(percent)/100 >= floor || atMin <= uint64(percent) {
		return percent
	}
	if live == 0 {
		return int(min(atMin, maxPercent))
	}
	return int(min((floor-live)*100/(live+roots), atMin, maxPercent))
}

// maxPercent bounds the GOGC Percent returns (the runtime keeps it in 32
// bits, and a negative value turns collection off).
const maxPercent = 100_000

type tuner struct {
	percent int
	floor   uint64
	sample  []metrics.Sample // used by the finalizer goroutine only
	stopped atomic.Bool
	// beforeSet, for tests, is called between reading the heap and
	// setting GOGC.
	beforeSet func()
}

// sentinel is garbage at once; its finalizer runs after the collection
// that found it. It holds a pointer so that it is not a tiny allocation,
// whose finalizer may never run.
type sentinel struct {
	_ *sentinel
	_ [16]byte
}

// arm makes a sentinel whose finalizer retunes GOGC after the next
// collection and arms the one after.
func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if t.retune() {
			t.arm()
		}
	})
}

// retune sets GOGC for the live heap and roots of the last collection,
// unless stopped; it reports whether to go on.
func (t *tuner) retune() bool {
	if t.stopped.Load() {
		return false
	}
	metrics.Read(t.sample)
	var v [3]uint64 // live heap, globals, stacks
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	if t.beforeSet != nil {
		t.beforeSet()
	}
	debug.SetGCPercent(Percent(v[0], v[1]+v[2], t.percent, t.floor))
	if t.stopped.Load() { // stop set GOGC meanwhile, maybe before the line above
		debug.SetGCPercent(t.percent)
		return false
	}
	return true
}
