package recovery

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"lifeboat/providers"
)

// inspectBatches lets Inspect calls through in batches: each call waits
// until size calls (or all n, for the last batch) have entered since its
// batch began, and the most calls inside Inspect at once is recorded. With
// at most size checks at once the batches fill one after the other; more
// at once shows as most > size.
type inspectBatches struct {
	mu                   sync.Mutex
	cond                 *sync.Cond
	size, n, entered, in int
	most                 int
	byInstance           map[providers.InstanceID]int
}

func newInspectBatches(size, n int) *inspectBatches {
	b := &inspectBatches{size: size, n: n, byInstance: map[providers.InstanceID]int{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *inspectBatches) enter(id providers.InstanceID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entered++
	b.byInstance[id]++
	b.in++
	b.most = max(b.most, b.in)
	end := min(((b.entered-1)/b.size+1)*b.size, b.n)
	b.cond.Broadcast()
	for b.entered < end {
		b.cond.Wait()
	}
	b.in--
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

// A periodic round checks at most MaxChecks workspaces at once, and checks
// every one of them.
func TestPeriodicRoundChecksAtMostMaxChecks(t *testing.T) {
	const slots, more = 3, 10
	e := newEnv(t, false, false, func(c *Config) { c.MaxChecks = slots; c.MaxParallel = 4 })
	e.addRunning(more)
	b := newInspectBatches(slots, more+1)
	e.prov.inspectHook = b.enter
	rs := e.l.Tick(context.Background())
	if len(rs) != more+1 {
		t.Fatalf("%d receipts, want %d", len(rs), more+1)
	}
	for _, r := range rs {
		e.want(r, Captured) // none had a checkpoint yet
	}
	if b.most != slots || len(b.byInstance) != more+1 {
		t.Fatalf("%d checks at once over %d instances, want %d at once over %d", b.most, len(b.byInstance), slots, more+1)
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

// The scheduled health check inspects the due workspaces MaxChecks at once,
// every one of them.
func TestCheckDueInspectsAtMostMaxChecks(t *testing.T) {
	const slots, more = 2, 7
	e := newEnv(t, false, false, func(c *Config) { c.MaxChecks = slots })
	e.addRunning(more)
	svc, err := NewService(ServiceConfig{Lifecycle: e.l, Restorer: nopRestorer{}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	b := newInspectBatches(slots, more+1)
	e.prov.inspectHook = b.enter
	svc.CheckDue(context.Background())
	if b.most != slots || len(b.byInstance) != more+1 {
		t.Fatalf("%d inspections at once over %d instances, want %d at once over %d", b.most, len(b.byInstance), slots, more+1)
	}
	for _, w := range e.mustWorkspaces() {
		if w.Health == nil || w.Health.State != HealthOK {
			t.Fatalf("workspace %s: health %+v, want ok", w.ID, w.Health)
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
