package recovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"lifeboat/providers"
)

// inSlots starts a call only while it can take a slot, and a released
// slot starts exactly one more.
func TestInSlotsHoldsTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slots, n = 3, 7
		var mu sync.Mutex
		var started []int
		releases := make(chan func(), n)
		done := make(chan struct{})
		go func() {
			inSlots(make(chan struct{}, slots), n, func(i int, release func()) {
				mu.Lock()
				started = append(started, i)
				mu.Unlock()
				releases <- release
			})
			close(done)
		}()
		count := func() int {
			synctest.Wait() // every goroutine blocked: no call can still start
			mu.Lock()
			defer mu.Unlock()
			return len(started)
		}
		if got := count(); got != slots {
			t.Fatalf("%d calls started with %d slots and none released", got, slots)
		}
		for want := slots + 1; want <= n; want++ {
			release := <-releases
			release()
			release() // a second release gives back nothing more
			if got := count(); got != want {
				t.Fatalf("%d calls started after %d releases, want %d", got, want-slots, want)
			}
		}
		for range slots {
			(<-releases)()
		}
		<-done
	})
}

// checkBatches lets calls through in batches: each waits until size calls
// (or all n, for the last batch) have entered since its batch began, and
// the most calls inside at once is recorded. With at most size checks at
// once the batches fill one after the other.
type checkBatches struct {
	mu                             sync.Mutex
	cond                           *sync.Cond
	size, n, entered, inside, most int
}

func newCheckBatches(size, n int) *checkBatches {
	b := &checkBatches{size: size, n: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *checkBatches) enter() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entered++
	b.inside++
	b.most = max(b.most, b.inside)
	end := min(((b.entered-1)/b.size+1)*b.size, b.n)
	b.cond.Broadcast()
	for b.entered < end {
		b.cond.Wait()
	}
	b.inside--
}

// instanceCounts counts the calls per instance.
type instanceCounts struct {
	mu sync.Mutex
	by map[providers.InstanceID]int
}

func (c *instanceCounts) add(id providers.InstanceID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[providers.InstanceID]int{}
	}
	c.by[id]++
}

// once fails t unless every one of want was counted exactly once.
func (c *instanceCounts) once(t *testing.T, want []Workspace) {
	t.Helper()
	if len(c.by) != len(want) {
		t.Fatalf("calls for %d instances, want %d: %v", len(c.by), len(want), c.by)
	}
	for _, w := range want {
		if c.by[w.Instance] != 1 {
			t.Fatalf("instance %s: %d calls, want 1 (%v)", w.Instance, c.by[w.Instance], c.by)
		}
	}
}

// addRunning adds n more running workspaces ws-0, ws-1, ... over the
// fake provider.
func (e *env) addRunning(n int) {
	e.t.Helper()
	for i := range n {
		id := providers.InstanceID(fmt.Sprintf("i-%d", i))
		e.prov.instance(e.t, id, map[string]string{"f.txt": fmt.Sprint(i)})
		if err := e.store.AddWorkspace(Workspace{ID: fmt.Sprintf("ws-%d", i), Provider: "fake", Instance: id, Created: e.clock.Now()}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) mustWorkspaces() []Workspace {
	e.t.Helper()
	wss, err := e.store.Workspaces()
	if err != nil {
		e.t.Fatal(err)
	}
	return wss
}

// A periodic round checks each workspace once, reading its files (the
// costly part for a remote provider: the mirror's sync) in one of
// MaxChecks slots.
func TestPeriodicRoundChecksAtMostMaxChecks(t *testing.T) {
	const slots = 3
	e := newEnv(t, false, true, func(c *Config) { c.MaxChecks = slots; c.MaxParallel = 4 })
	e.addRunning(10)
	wss := e.mustWorkspaces()
	for _, r := range e.l.Tick(context.Background()) {
		e.want(r, Captured) // every workspace has a checkpoint and a fingerprint now
	}
	b := newCheckBatches(slots, len(wss))
	var inspected instanceCounts
	e.prov.inspectHook = inspected.add
	e.prov.readFilesHook = b.enter
	for _, r := range e.l.Tick(context.Background()) {
		e.want(r, Unchanged)
	}
	inspected.once(t, wss)
	if b.entered != len(wss) || b.most != slots {
		t.Fatalf("%d file reads, at most %d at once; want %d, at most %d", b.entered, b.most, len(wss), slots)
	}
}

// A workspace that changed gives its check slot back before it waits for a
// capture slot: with one of each, the other workspaces are checked while
// the first capture still runs.
func TestPeriodicCheckSlotFreeDuringCapture(t *testing.T) {
	e := newEnv(t, false, false, func(c *Config) { c.MaxChecks = 1; c.MaxParallel = 1 })
	e.addRunning(2)
	e.cap.started = make(chan int, 3)
	e.cap.gate = make(chan struct{})
	inspected := make(chan providers.InstanceID, 3)
	e.prov.inspectHook = func(id providers.InstanceID) { inspected <- id }
	done := make(chan []Receipt)
	go func() { done <- e.l.Tick(context.Background()) }()
	<-e.cap.started // the first workspace's capture runs, and waits at the gate
	seen := map[providers.InstanceID]bool{}
	for range 3 {
		seen[<-inspected] = true // every workspace is checked before that capture ends
	}
	if len(seen) != 3 {
		t.Fatalf("checked %v, want 3 instances", seen)
	}
	for range 3 {
		e.cap.gate <- struct{}{}
	}
	for _, r := range <-done {
		e.want(r, Captured)
	}
}

// The scheduled health check inspects every due workspace once, in the
// lifecycle's MaxChecks slots.
func TestCheckDueInspectsAtMostMaxChecks(t *testing.T) {
	const slots = 2
	e := newEnv(t, false, false, func(c *Config) { c.MaxChecks = slots })
	e.addRunning(7)
	wss := e.mustWorkspaces()
	svc, err := NewService(ServiceConfig{Lifecycle: e.l, Restorer: nopRestorer{}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	b := newCheckBatches(slots, len(wss))
	var inspected instanceCounts
	e.prov.inspectHook = func(id providers.InstanceID) { inspected.add(id); b.enter() }
	svc.CheckDue(context.Background())
	inspected.once(t, wss)
	if b.most != slots {
		t.Fatalf("%d inspections at once, want %d", b.most, slots)
	}
	for _, w := range e.mustWorkspaces() {
		if w.Health == nil || w.Health.State != HealthOK {
			t.Fatalf("workspace %s: health %+v, want ok", w.ID, w.Health)
		}
	}
}

// An inspection that ends because its context did (a client gone, the
// server stopping) records nothing: the workspace is not unreachable.
func TestCheckCalledOffRecordsNothing(t *testing.T) {
	e := newEnv(t, false, false, nil)
	svc, err := NewService(ServiceConfig{Lifecycle: e.l, Restorer: nopRestorer{}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	e.prov.inspectErr = func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		return e.prov.err("inspect", "i1", providers.KindUnavailable, ctx.Err())
	}
	if _, err := svc.Check(ctx, "ws1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("called-off check: %v, want context.Canceled", err)
	}
	if h := e.ws("ws1").Health; h != nil {
		t.Fatalf("called-off check recorded %+v", h)
	}
	e.prov.inspectErr = nil
	if h, err := svc.Check(context.Background(), "ws1"); err != nil || h.State != HealthOK {
		t.Fatalf("next check: %+v, %v", h, err)
	}
}
