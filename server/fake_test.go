package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"lifeboat/recovery"
)

// fakeRecovery is an in-memory RecoveryService that keeps the contract the
// server relies on: idempotent approvals and restarts, a checkpoint check,
// holds resolved once, and one event per change to every subscriber. Its
// workspaces are a real lifecycle's.
type fakeRecovery struct {
	Lifecycle
	mu        sync.Mutex
	states    map[string]RecoveryState
	ops       map[string]Operation // by id
	opKeys    map[string]string    // idempotency key -> op id
	procs     map[string][]LostProcess
	restarts  map[string]ProcessRestart // by key
	runs      map[string]int            // process id -> times started
	holds     map[string]RepairHold
	subs      map[chan Event]struct{}
	approvals int // operations created
}

func newFakeRecovery(life Lifecycle) *fakeRecovery {
	return &fakeRecovery{Lifecycle: life, states: map[string]RecoveryState{}, ops: map[string]Operation{}, opKeys: map[string]string{},
		procs: map[string][]LostProcess{}, restarts: map[string]ProcessRestart{}, runs: map[string]int{},
		holds: map[string]RepairHold{}, subs: map[chan Event]struct{}{}}
}

// publish sends ev to every subscriber; called with f.mu held, so events
// go out in the order the changes happened.
func (f *fakeRecovery) publish(ev Event) {
	for ch := range f.subs {
		ch <- ev
	}
}

// set changes a workspace's state and publishes it.
func (f *fakeRecovery) set(st RecoveryState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[st.Workspace] = st
	f.publish(Event{Type: "recovery_state", Workspace: st.Workspace, Data: st})
}

func (f *fakeRecovery) State(_ context.Context, ws string) (RecoveryState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.states[ws]
	if !ok {
		return RecoveryState{Workspace: ws, State: StateHealthy}, nil
	}
	return st, nil
}

func (f *fakeRecovery) Offer(_ context.Context, ws string) (Offer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[ws]
	if st.State != StateLost || st.Offer == nil {
		return Offer{}, fmt.Errorf("workspace %s is %s: %w", ws, st.State, recovery.ErrNotLost)
	}
	return *st.Offer, nil
}

func (f *fakeRecovery) Approve(_ context.Context, ws, checkpoint, key string) (Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.opKeys[key]; ok {
		op := f.ops[id]
		if op.Workspace != ws || op.Checkpoint != checkpoint {
			return Operation{}, fmt.Errorf("key %s: %w", key, recovery.ErrKeyReused)
		}
		return op, nil
	}
	st := f.states[ws]
	switch {
	case st.State == StateRecovering:
		return Operation{}, fmt.Errorf("workspace %s: %w", ws, recovery.ErrRecovering)
	case st.State != StateLost || st.Offer == nil:
		return Operation{}, fmt.Errorf("workspace %s is %s: %w", ws, st.State, recovery.ErrNotLost)
	case st.Offer.Checkpoint != checkpoint:
		return Operation{}, fmt.Errorf("offered %s, approved %s: %w", st.Offer.Checkpoint, checkpoint, recovery.ErrStaleOffer)
	}
	f.approvals++
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	op := Operation{ID: fmt.Sprintf("op-%d", f.approvals), Workspace: ws, Checkpoint: checkpoint, IdempotencyKey: key,
		Generation: st.Generation, Step: "approved", Created: now, Updated: now}
	f.ops[op.ID], f.opKeys[key] = op, op.ID
	st.State, st.Operation, st.Offer = StateRecovering, op.ID, nil
	f.states[ws] = st
	f.publish(Event{Type: "operation", Workspace: ws, Data: op})
	f.publish(Event{Type: "recovery_state", Workspace: ws, Data: st})
	return op, nil
}

func (f *fakeRecovery) Operation(_ context.Context, id string) (Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	op, ok := f.ops[id]
	if !ok {
		return Operation{}, fmt.Errorf("%w %q", recovery.ErrUnknownOperation, id)
	}
	return op, nil
}

func (f *fakeRecovery) LostProcesses(_ context.Context, ws string) ([]LostProcess, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]LostProcess(nil), f.procs[ws]...), nil
}

func (f *fakeRecovery) RestartProcess(_ context.Context, ws, proc, key string) (ProcessRestart, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.restarts[key]; ok {
		if r.Workspace != ws || r.Process != proc {
			return ProcessRestart{}, fmt.Errorf("key %s: %w", key, recovery.ErrKeyReused)
		}
		return r, nil
	}
	for i, p := range f.procs[ws] {
		if p.ID == proc {
			f.runs[proc]++
			f.procs[ws][i].State = "restarting"
			r := ProcessRestart{Workspace: ws, Process: proc, IdempotencyKey: key, State: "restarting"}
			f.restarts[key] = r
			f.publish(Event{Type: "process", Workspace: ws, Data: f.procs[ws][i]})
			return r, nil
		}
	}
	return ProcessRestart{}, fmt.Errorf("workspace %s: process %q: %w", ws, proc, recovery.ErrUnknownProcess)
}

func (f *fakeRecovery) RepairHolds(context.Context) ([]RepairHold, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []RepairHold
	for _, h := range f.holds {
		out = append(out, h)
	}
	return out, nil
}

func (f *fakeRecovery) ResolveHold(_ context.Context, id string, r Resolution) (RepairHold, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.holds[id]
	switch {
	case !ok:
		return RepairHold{}, fmt.Errorf("%w %q", recovery.ErrUnknownHold, id)
	case h.Resolution != nil:
		return RepairHold{}, fmt.Errorf("repair hold %s: %w", id, recovery.ErrHoldResolved)
	}
	h.Resolution = &r
	f.holds[id] = h
	f.publish(Event{Type: "repair_hold", Workspace: h.Workspace, Data: h})
	return h, nil
}

// Subscribe returns an unbuffered channel: publish blocks until the
// server's pump takes each event, so the order is kept.
func (f *fakeRecovery) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event)
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

func (f *fakeRecovery) Check(ctx context.Context, ws string) (RecoveryState, error) {
	return f.State(ctx, ws)
}

func (f *fakeRecovery) Operations(_ context.Context, ws string) ([]Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []Operation{}
	for _, op := range f.ops {
		if ws == "" || op.Workspace == ws {
			out = append(out, op)
		}
	}
	return out, nil
}

func (f *fakeRecovery) AllRepairHolds(ctx context.Context) ([]RepairHold, error) {
	return f.RepairHolds(ctx)
}

func (f *fakeRecovery) RepairHold(_ context.Context, id string) (RepairHoldDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.holds[id]
	if !ok {
		return RepairHoldDetail{}, fmt.Errorf("%w %q", recovery.ErrUnknownHold, id)
	}
	return RepairHoldDetail{RepairHold: h}, nil
}

func (f *fakeRecovery) StopRepairHold(_ context.Context, id string) (RepairHold, error) {
	return RepairHold{}, fmt.Errorf("repair hold %q: %w", id, ErrRecoveryUnavailable)
}

var _ RecoveryService = (*fakeRecovery)(nil)

// lostState is a lost workspace with an offer of checkpoint cp.
func lostState(ws string, gen uint64, cp string, at time.Time) RecoveryState {
	return RecoveryState{Workspace: ws, State: StateLost, Instance: "gone-1", Generation: gen, Action: "approve a recovery",
		Offer: &Offer{Workspace: ws, Checkpoint: cp, CheckpointTime: at, AgeSeconds: 3600, Profile: true,
			NotRecoverable: []string{"running processes", "changes after the checkpoint", "provider-side state"},
			LostProcesses:  []LostProcess{{ID: "p1", Command: []string{"npm", "run", "dev"}, LastOutput: "listening on :3000", State: "lost"}}}}
}
