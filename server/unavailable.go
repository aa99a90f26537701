package server

import (
	"context"
	"fmt"
	"sync"

	"lifeboat/recovery"
)

// NoRecovery is the RecoveryService of a server that has only the
// checkpoint lifecycle: it reports every workspace's instance and
// generation with state "unchecked" (loss is not detected), and refuses
// every recovery action with ErrRecoveryUnavailable. Workspaces,
// checkpoints, park and the event stream work as usual.
type NoRecovery struct {
	Lifecycle
}

// StateUnchecked: no recovery service watches the workspace.
const StateUnchecked = "unchecked"

func (n *NoRecovery) State(_ context.Context, ws string) (RecoveryState, error) {
	w, err := n.Workspace(ws)
	if err != nil {
		return RecoveryState{}, err
	}
	return RecoveryState{Workspace: ws, State: StateUnchecked, Instance: string(w.Instance), Generation: w.Generation,
		Action: "loss detection is not running in this server; checkpoints and park work", Holds: []RepairHold{}}, nil
}

func (n *NoRecovery) unavailable(what string) error {
	return fmt.Errorf("%s: %w", what, ErrRecoveryUnavailable)
}

func (n *NoRecovery) Offer(_ context.Context, ws string) (Offer, error) {
	return Offer{}, n.unavailable("workspace " + ws + ": no offer")
}

func (n *NoRecovery) Approve(_ context.Context, ws, _, _ string) (Operation, error) {
	return Operation{}, n.unavailable("workspace " + ws + ": cannot approve a recovery")
}

func (n *NoRecovery) Operation(_ context.Context, id string) (Operation, error) {
	return Operation{}, fmt.Errorf("%w %q", recovery.ErrUnknownOperation, id)
}

func (n *NoRecovery) LostProcesses(_ context.Context, ws string) ([]LostProcess, error) {
	_, err := n.Workspace(ws)
	return nil, err
}

func (n *NoRecovery) RestartProcess(_ context.Context, ws, proc, _ string) (ProcessRestart, error) {
	return ProcessRestart{}, n.unavailable("workspace " + ws + ": cannot restart process " + proc)
}

func (n *NoRecovery) RepairHolds(context.Context) ([]RepairHold, error) { return nil, nil }

func (n *NoRecovery) ResolveHold(_ context.Context, id string, _ Resolution) (RepairHold, error) {
	return RepairHold{}, fmt.Errorf("%w %q", recovery.ErrUnknownHold, id)
}

// Subscribe returns a channel that only closes, on cancel.
func (n *NoRecovery) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event)
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}

func (n *NoRecovery) Check(ctx context.Context, ws string) (RecoveryState, error) {
	return n.State(ctx, ws)
}

func (n *NoRecovery) Operations(context.Context, string) ([]Operation, error) {
	return []Operation{}, nil
}

func (n *NoRecovery) AllRepairHolds(context.Context) ([]RepairHold, error) { return nil, nil }

func (n *NoRecovery) RepairHold(_ context.Context, id string) (RepairHoldDetail, error) {
	return RepairHoldDetail{}, fmt.Errorf("%w %q", recovery.ErrUnknownHold, id)
}

func (n *NoRecovery) StopRepairHold(_ context.Context, id string) (RepairHold, error) {
	return RepairHold{}, fmt.Errorf("%w %q", recovery.ErrUnknownHold, id)
}
