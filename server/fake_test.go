package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"lifeboat/recovery"
)

// fakeRecovery is an in-memory recovery state machine that keeps the
// contract of RecoveryService the server relies on: idempotent approvals
// and restarts, a checkpoint check, holds resolved once, and one event per
// change to every subscriber. Its workspaces are a real lifecycle's; the
// server shows its states through recoveryView, as it shows the real
// service's.
type fakeRecovery struct {
	Lifecycle
	mu        sync.Mutex
	states    map[string]recovery.WorkspaceState
	offers    map[string]recovery.Offer
	ops       map[string]recovery.Operation // by id
	opKeys    map[string]string             // idempotency key -> op id
	procs     map[string][]recovery.LostProcess
	restarts  map[string]recovery.ProcessRestart // by key
	runs      map[int]int                        // process index -> times started
	holds     map[string]recovery.Hold
	subs      map[chan recovery.Event]struct{}
	approvals int // operations created
}

func newFakeRecovery(life Lifecycle) *fakeRecovery {
	return &fakeRecovery{Lifecycle: life, states: map[string]recovery.WorkspaceState{}, offers: map[string]recovery.Offer{},
		ops: map[string]recovery.Operation{}, opKeys: map[string]string{}, procs: map[string][]recovery.LostProcess{},
		restarts: map[string]recovery.ProcessRestart{}, runs: map[int]int{}, holds: map[string]recovery.Hold{},
		subs: map[chan recovery.Event]struct{}{}}
}

// fakeCheck is when the fake inspects (Check): a fixed time, so that what
// the server shows does not depend on when the test runs.
var fakeCheck = time.Date(2026, 11, 29, 12, 30, 0, 0, time.UTC)

// checkEvery is the fake's check interval: each state's next check comes
// this long after it began.
const checkEvery = 15 * time.Minute

// publish sends ev to every subscriber; called with f.mu held, so events
// go out in the order the changes happened.
func (f *fakeRecovery) publish(ev recovery.Event) {
	for ch := range f.subs {
		ch <- ev
	}
}

// set changes a workspace's state (and, when offer is set, its offer) and
// publishes it.
func (f *fakeRecovery) set(st recovery.WorkspaceState, offer *recovery.Offer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st.Health != nil && st.Health.NextCheck.IsZero() {
		st.Health.NextCheck = st.Health.Since.Add(checkEvery)
	}
	f.states[st.Workspace] = st
	delete(f.offers, st.Workspace)
	if offer != nil {
		f.offers[st.Workspace] = *offer
	}
	var h recovery.HealthState
	if st.Health != nil {
		h = st.Health.State
	}
	f.publish(recovery.Event{Workspace: st.Workspace, Kind: recovery.EventHealth, State: h})
}

func (f *fakeRecovery) State(ws string) (recovery.WorkspaceState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.states[ws]; ok {
		return st, nil
	}
	w, err := f.Workspace(ws)
	if err != nil {
		return recovery.WorkspaceState{}, err
	}
	return recovery.WorkspaceState{Workspace: ws, Provider: w.Provider, Instance: w.Instance, Generation: w.Generation}, nil
}

// Check finds an uninspected workspace healthy, and leaves a set state as
// it is (the server inspects on use whenever a state's next check has
// passed, which the fake's always has).
func (f *fakeRecovery) Check(_ context.Context, ws string) (recovery.Health, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.states[ws]
	if !ok {
		w, err := f.Workspace(ws)
		if err != nil {
			return recovery.Health{}, err
		}
		st = recovery.WorkspaceState{Workspace: ws, Provider: w.Provider, Instance: w.Instance, Generation: w.Generation}
	}
	if st.Health == nil {
		st.Health = &recovery.Health{State: recovery.HealthOK, Instance: st.Instance, CheckedAt: fakeCheck, Since: fakeCheck,
			NextCheck: fakeCheck.Add(checkEvery)}
		f.states[ws] = st
	}
	return *st.Health, nil
}

func (f *fakeRecovery) Offer(_ context.Context, ws string) (recovery.Offer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.offers[ws]
	if !ok {
		return recovery.Offer{}, fmt.Errorf("workspace %s: %w", ws, recovery.ErrNotLost)
	}
	return o, nil
}

func (f *fakeRecovery) Approve(_ context.Context, ws, checkpoint, key string) (recovery.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.opKeys[key]; ok {
		op := f.ops[id]
		if op.Workspace != ws || op.Checkpoint != checkpoint {
			return recovery.Operation{}, fmt.Errorf("key %s: %w", key, recovery.ErrKeyReused)
		}
		return op, nil
	}
	st := f.states[ws]
	o, offered := f.offers[ws]
	switch {
	case st.Health != nil && st.Health.State == recovery.HealthRecovering:
		return recovery.Operation{}, fmt.Errorf("workspace %s: %w", ws, recovery.ErrRecovering)
	case !offered:
		return recovery.Operation{}, fmt.Errorf("workspace %s: %w", ws, recovery.ErrNotLost)
	case o.Checkpoint != checkpoint:
		return recovery.Operation{}, fmt.Errorf("offered %s, approved %s: %w", o.Checkpoint, checkpoint, recovery.ErrStaleOffer)
	}
	f.approvals++
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	op := recovery.Operation{ID: fmt.Sprintf("op-%d", f.approvals), Workspace: ws, Checkpoint: checkpoint, IdempotencyKey: key,
		Generation: st.Generation, State: recovery.OpApproved, Created: now, Updated: now}
	f.ops[op.ID], f.opKeys[key] = op, op.ID
	st.Health = &recovery.Health{State: recovery.HealthRecovering, Instance: st.Instance, Since: now}
	st.Operation = &op
	f.states[ws] = st
	delete(f.offers, ws)
	f.publish(recovery.Event{Workspace: ws, Kind: recovery.EventOperation, Operation: op.ID, OpState: op.State})
	return op, nil
}

func (f *fakeRecovery) Operation(id string) (recovery.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	op, ok := f.ops[id]
	if !ok {
		return recovery.Operation{}, fmt.Errorf("%w %q", recovery.ErrUnknownOperation, id)
	}
	return op, nil
}

func (f *fakeRecovery) Operations(ws string) ([]recovery.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recovery.Operation
	for _, op := range f.ops {
		if ws == "" || op.Workspace == ws {
			out = append(out, op)
		}
	}
	return out, nil
}

func (f *fakeRecovery) LostProcesses(ws string) ([]recovery.LostProcess, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recovery.LostProcess(nil), f.procs[ws]...), nil
}

func (f *fakeRecovery) RestartProcess(_ context.Context, ws string, index int, key string) (recovery.ProcessRestart, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.restarts[key]; ok {
		if r.Workspace != ws || r.Index != index {
			return recovery.ProcessRestart{}, fmt.Errorf("key %s: %w", key, recovery.ErrKeyReused)
		}
		return r, nil
	}
	ps := f.procs[ws]
	if index < 0 || index >= len(ps) {
		return recovery.ProcessRestart{}, fmt.Errorf("workspace %s: process %d: %w", ws, index, recovery.ErrUnknownProcess)
	}
	f.runs[index]++
	r := recovery.ProcessRestart{Key: key, Workspace: ws, Index: index, Command: ps[index].Command, State: "running", Started: time.Now()}
	ps[index].Restarts = append(ps[index].Restarts, r)
	f.restarts[key] = r
	f.publish(recovery.Event{Workspace: ws, Kind: recovery.EventProcess})
	return r, nil
}

func (f *fakeRecovery) RepairHolds() ([]recovery.Hold, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recovery.Hold
	for _, h := range f.holds {
		if h.Resolution == nil {
			out = append(out, h)
		}
	}
	return out, nil
}

func (f *fakeRecovery) AllHolds() ([]recovery.Hold, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recovery.Hold
	for _, h := range f.holds {
		out = append(out, h)
	}
	return out, nil
}

func (f *fakeRecovery) Hold(id string) (recovery.Hold, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.holds[id]
	if !ok {
		return recovery.Hold{}, fmt.Errorf("%w %q", recovery.ErrUnknownHold, id)
	}
	return h, nil
}

func (f *fakeRecovery) Allocation(_ context.Context, id string) (recovery.Allocation, error) {
	h, err := f.Hold(id)
	return recovery.Allocation{Hold: h.ID, Provider: h.Provider}, err
}

func (f *fakeRecovery) StopHold(_ context.Context, id string) (recovery.Hold, error) {
	return recovery.Hold{}, fmt.Errorf("repair hold %q: stopping is not part of the fake: %w", id, recovery.ErrUnknownHold)
}

func (f *fakeRecovery) ResolveHold(id string, outcome recovery.HoldOutcome, evidence string) (recovery.Hold, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.holds[id]
	switch {
	case !ok:
		return recovery.Hold{}, fmt.Errorf("%w %q", recovery.ErrUnknownHold, id)
	case h.Resolution != nil:
		return recovery.Hold{}, fmt.Errorf("repair hold %s: %w", id, recovery.ErrHoldResolved)
	}
	h.Resolution = &recovery.Resolution{Outcome: outcome, Evidence: evidence, Time: time.Now().UTC()}
	f.holds[id] = h
	f.publish(recovery.Event{Workspace: h.Workspace, Kind: recovery.EventHold, Hold: id})
	return h, nil
}

// Subscribe returns a buffered channel, like the real service's: publish
// sends under f.mu, so the order is kept, and does not wait for the
// server, which reads the state back (under f.mu) for each event.
func (f *fakeRecovery) Subscribe() (<-chan recovery.Event, func()) {
	ch := make(chan recovery.Event, 64)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.subs, ch)
			f.mu.Unlock()
			close(ch)
		})
	}
}

var _ RecoveryService = (*fakeRecovery)(nil)

// lost is a lost workspace (instance gone-1 at generation gen) and its
// offer of checkpoint cp, taken at at, with a lost process.
func lost(ws string, gen uint64, cp string, at time.Time) (recovery.WorkspaceState, *recovery.Offer) {
	st := recovery.WorkspaceState{Workspace: ws, Instance: "gone-1", Generation: gen,
		Health: &recovery.Health{State: recovery.HealthLost, Instance: "gone-1", Action: "approve a recovery", Since: at}}
	return st, &recovery.Offer{Workspace: ws, Checkpoint: cp, Time: at, Age: time.Hour, BrowserProfile: true,
		NotRecoverable: []string{"running processes", "changes after the checkpoint", "provider-side state"},
		LostProcesses:  []recovery.ProcessRecord{{Command: []string{"npm", "run", "dev"}, Tail: "listening on :3000"}}}
}
