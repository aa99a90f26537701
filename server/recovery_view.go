package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"lifeboat/recovery"
)

// recoveryView shows the recovery state machine of the seam in the API's
// words: it translates states, steps, ids and outcomes (docs/server.md,
// "Recovery"); errors pass through unchanged.
type recoveryView struct {
	svc RecoveryService
}

// healthStates maps a recovery health state to the server's. check_failed
// (a provider error that is neither an outage, an auth failure nor a rate
// limit) is shown as unreachable: like it, nothing was changed and the
// workspace is checked again at NextCheck; the action carries the detail.
var healthStates = map[recovery.HealthState]string{
	recovery.HealthOK:          StateHealthy,
	recovery.HealthLost:        StateLost,
	recovery.HealthUnreachable: StateUnreachable,
	recovery.HealthAuthFailed:  StateAuthFailed,
	recovery.HealthRateLimited: StateRateLimited,
	recovery.HealthCheckFailed: StateUnreachable,
	recovery.HealthRecovering:  StateRecovering,
}

// State returns the workspace's recovery state. Like any use of the
// workspace, it inspects the instance first when its check is due (never
// inspected, or past next_check) and no recovery runs.
func (a recoveryView) State(ctx context.Context, ws string) (RecoveryState, error) {
	return a.state(ctx, ws, true)
}

func (a recoveryView) state(ctx context.Context, ws string, check bool) (RecoveryState, error) {
	st, err := a.svc.State(ws)
	if err != nil {
		return RecoveryState{}, err
	}
	if h := st.Health; check && (h == nil || (h.State != recovery.HealthRecovering && !time.Now().Before(h.NextCheck))) {
		if _, err := a.svc.Check(ctx, ws); err != nil {
			return RecoveryState{}, err
		}
		if st, err = a.svc.State(ws); err != nil {
			return RecoveryState{}, err
		}
	}
	out := RecoveryState{Workspace: ws, State: StateUnchecked, Instance: string(st.Instance), Generation: st.Generation,
		Action: "the instance was not inspected yet", Holds: make([]RepairHold, 0, len(st.Holds))}
	for _, h := range st.Holds {
		out.Holds = append(out.Holds, repairHold(h))
	}
	if st.Operation != nil {
		out.Operation = st.Operation.ID
	}
	h := st.Health
	if h == nil {
		return out, nil
	}
	out.State, out.Action, out.Updated = healthStates[h.State], h.Action, h.Since
	out.Detail = h.Detail
	if !h.CheckedAt.IsZero() {
		checked := h.CheckedAt
		out.CheckedAt = &checked
	}
	if h.State == recovery.HealthCheckFailed {
		out.Action = "checking the instance failed (" + h.Detail + "): " + h.Action
	}
	if h.State != recovery.HealthRecovering {
		next := h.NextCheck
		out.NextCheck = &next
	}
	if h.State != recovery.HealthLost {
		return out, nil
	}
	// Lost again because the last operation failed (no inspection has
	// changed the state since): failed, with the offer to approve again.
	if op := st.Operation; op != nil && op.State == recovery.OpFailed && !h.Since.Before(op.Updated) {
		out.State = StateFailed
	}
	// The offer needs the checkpoint's manifest: a repository that cannot
	// read it does not hide the state.
	if o, err := a.Offer(ctx, ws); err == nil {
		out.Offer = &o
	} else {
		out.Action += "; no offer can be shown: " + err.Error()
	}
	return out, nil
}

// Offer returns the recovery offer of a lost workspace.
func (a recoveryView) Offer(ctx context.Context, ws string) (Offer, error) {
	o, err := a.svc.Offer(ctx, ws)
	if err != nil {
		return Offer{}, err
	}
	out := Offer{Workspace: o.Workspace, Checkpoint: o.Checkpoint, CheckpointTime: o.Time, AgeSeconds: o.Age.Seconds(),
		Files: o.Files, Bytes: o.Bytes, Profile: o.BrowserProfile, Profiles: o.Profiles, ProfileLocked: o.ProfileLocked, NotRecoverable: o.NotRecoverable, LostProcesses: make([]LostProcess, 0, len(o.LostProcesses)),
		Candidates: o.Candidates, Warning: o.Warning}
	for i, p := range o.LostProcesses {
		out.LostProcesses = append(out.LostProcesses, lostProcess(i, p, "lost"))
	}
	return out, nil
}

// Approve starts (or, for a repeated key, returns) the recovery of ws.
func (a recoveryView) Approve(ctx context.Context, ws, checkpoint, key string) (Operation, error) {
	op, err := a.svc.Approve(ctx, ws, checkpoint, key)
	if err != nil {
		return Operation{}, err
	}
	return operation(op), nil
}

// Operation returns one recovery operation.
func (a recoveryView) Operation(_ context.Context, id string) (Operation, error) {
	op, err := a.svc.Operation(id)
	if err != nil {
		return Operation{}, err
	}
	return operation(op), nil
}

// operation maps a recovery operation. rolling_back is shown as failed:
// the outcome is decided (nothing is switched in), only the replacement's
// destruction is still running, and the workspace stays recovering until
// it ends. A step waiting on a provider error shows why in Error.
func operation(op recovery.Operation) Operation {
	out := Operation{ID: op.ID, Workspace: op.Workspace, Checkpoint: op.Checkpoint, IdempotencyKey: op.IdempotencyKey,
		Generation: op.Generation, Step: string(op.State), NewInstance: string(op.Replacement), Error: op.Error,
		Action: op.Action, Created: op.Created, Updated: op.Updated}
	switch {
	case op.State == recovery.OpRollingBack:
		out.Step = string(recovery.OpFailed)
		if out.Error == "" {
			out.Error = "rolling back"
		}
		out.Error += " (the replacement is being destroyed)"
	case out.Error == "" && op.LastError != "" && !op.State.Terminal():
		out.Error = "waiting until " + op.RetryAt.UTC().Format(time.RFC3339) + " to try again: " + op.LastError
	}
	return out
}

// Process ids in the API are the decimal index of the process in the
// workspace's lost set ("0", "1", ...).
func lostProcess(i int, p recovery.ProcessRecord, state string) LostProcess {
	return LostProcess{ID: strconv.Itoa(i), Command: p.Command, Dir: p.Dir, Started: p.Started, Ended: p.Ended,
		ExitCode: p.ExitCode, LastOutput: p.Tail, Truncated: p.Truncated, State: state}
}

// restartStates maps a restart record's state to the API's.
var restartStates = map[string]string{"running": "restarting", "done": "restarted", "failed": "restart_failed",
	"interrupted": "restart_failed"}

// LostProcesses returns the processes the last recovery of ws lost.
func (a recoveryView) LostProcesses(_ context.Context, ws string) ([]LostProcess, error) {
	ps, err := a.svc.LostProcesses(ws)
	if err != nil {
		return nil, err
	}
	out := make([]LostProcess, 0, len(ps))
	for _, p := range ps {
		lp := lostProcess(p.Index, p.ProcessRecord, "lost")
		if n := len(p.Restarts); n > 0 {
			r := restartView(p.Restarts[n-1])
			lp.State, lp.Restart = r.State, &r
		}
		out = append(out, lp)
	}
	return out, nil
}

// RestartProcess runs lost process proc of ws again (idempotent per key).
func (a recoveryView) RestartProcess(ctx context.Context, ws, proc, key string) (ProcessRestart, error) {
	ps, err := a.svc.LostProcesses(ws)
	if err != nil {
		return ProcessRestart{}, err
	}
	i, err := strconv.Atoi(proc)
	if err != nil || i < 0 || i >= len(ps) {
		return ProcessRestart{}, fmt.Errorf("workspace %s has no lost process %q (list them at /v1/workspaces/%s/processes): %w", ws, proc, ws, recovery.ErrUnknownProcess)
	}
	r, err := a.svc.RestartProcess(ctx, ws, i, key)
	if err != nil {
		return ProcessRestart{}, err
	}
	return restartView(r), nil
}

// restartView is the API's view of one restart of a lost process.
func restartView(r recovery.ProcessRestart) ProcessRestart {
	out := ProcessRestart{Workspace: r.Workspace, Process: strconv.Itoa(r.Index), IdempotencyKey: r.Key,
		State: restartStates[r.State], Requested: r.Started, Error: r.Error}
	if r.State == "done" {
		code := r.ExitCode
		out.ExitCode, out.Output = &code, r.Output
	}
	return out
}

// RepairHolds returns the unresolved repair holds.
func (a recoveryView) RepairHolds(context.Context) ([]RepairHold, error) {
	return repairHolds(a.svc.RepairHolds())
}

// repairHolds maps a list of holds.
func repairHolds(hs []recovery.Hold, err error) ([]RepairHold, error) {
	if err != nil {
		return nil, err
	}
	out := make([]RepairHold, 0, len(hs))
	for _, h := range hs {
		out = append(out, repairHold(h))
	}
	return out, nil
}

// holdOutcomes maps the outcomes the API accepts to the recovery's: its
// own words, and the API's examples (copied_back: finished by hand and
// adopted; discarded: destroyed; escalated: kept for investigation).
var holdOutcomes = map[string]recovery.HoldOutcome{
	"destroyed": recovery.HoldDestroyed, "discarded": recovery.HoldDestroyed,
	"repaired": recovery.HoldRepaired, "copied_back": recovery.HoldRepaired,
	"kept": recovery.HoldKept, "escalated": recovery.HoldKept,
}

// ResolveHold records an operator's resolution. The recovery store keeps
// no operator field: the operator is recorded at the start of the evidence
// as "[by LABEL] " and read back from there.
func (a recoveryView) ResolveHold(_ context.Context, id string, r Resolution) (RepairHold, error) {
	outcome, ok := holdOutcomes[r.Outcome]
	if !ok {
		return RepairHold{}, badRequest(fmt.Sprintf(
			"repair hold %s: outcome %q: use destroyed (or discarded), repaired (or copied_back), or kept (or escalated)", id, r.Outcome))
	}
	h, err := a.svc.ResolveHold(id, outcome, "[by "+r.Operator+"] "+r.Evidence)
	if err != nil {
		return RepairHold{}, err
	}
	return repairHold(h), nil
}

// repairHold maps a hold: SourceInstance is the lost instance whose data
// was being copied, TargetInstance the replacement allocation kept; the
// error names the failure class, the attempts and the restored tree kept
// on this host.
func repairHold(h recovery.Hold) RepairHold {
	out := RepairHold{ID: h.ID, Workspace: h.Workspace, Operation: h.Operation, Provider: h.Provider, Checkpoint: h.Checkpoint,
		SourceInstance: string(h.Lost), TargetInstance: string(h.Replacement), Created: h.Created, Stop: h.Stop,
		Error: fmt.Sprintf("%s; the restored tree is kept at %s", h.Error, h.Source)}
	if res := h.Resolution; res != nil {
		r := Resolution{Outcome: string(res.Outcome), Evidence: res.Evidence, Time: res.Time}
		if rest, ok := strings.CutPrefix(res.Evidence, "[by "); ok {
			if op, ev, ok := strings.Cut(rest, "] "); ok {
				r.Operator, r.Evidence = op, ev
			}
		}
		out.Resolution = &r
	}
	return out
}

// Check inspects the workspace's instance now and returns its state.
func (a recoveryView) Check(ctx context.Context, ws string) (RecoveryState, error) {
	if _, err := a.svc.Check(ctx, ws); err != nil {
		return RecoveryState{}, err
	}
	return a.state(ctx, ws, false)
}

// Operations lists the recovery operations of ws ("" for all).
func (a recoveryView) Operations(_ context.Context, ws string) ([]Operation, error) {
	ops, err := a.svc.Operations(ws)
	if err != nil {
		return nil, err
	}
	out := make([]Operation, 0, len(ops))
	for _, op := range ops {
		out = append(out, operation(op))
	}
	return out, nil
}

// AllRepairHolds lists every repair hold, resolved ones included.
func (a recoveryView) AllRepairHolds(context.Context) ([]RepairHold, error) {
	return repairHolds(a.svc.AllHolds())
}

// RepairHold returns one hold with its allocation as the provider reports
// it now.
func (a recoveryView) RepairHold(ctx context.Context, id string) (RepairHoldDetail, error) {
	h, err := a.svc.Hold(id)
	if err != nil {
		return RepairHoldDetail{}, err
	}
	al, err := a.svc.Allocation(ctx, id)
	if err != nil {
		return RepairHoldDetail{}, err
	}
	return RepairHoldDetail{RepairHold: repairHold(h), Allocation: al}, nil
}

// StopRepairHold stops the allocation a hold keeps.
func (a recoveryView) StopRepairHold(ctx context.Context, id string) (RepairHold, error) {
	h, err := a.svc.StopHold(ctx, id)
	if err != nil {
		return RepairHold{}, err
	}
	return repairHold(h), nil
}

// Subscribe turns every recovery event into the server's events, each
// carrying what it names as read now: the workspace's recovery_state (for
// every kind), the operation, the repair hold, or the workspace's lost
// processes (a process event's data is the list: the recovery event does
// not say which one changed). The channel closes on cancel (the server
// cancels in Close, before the caller closes the Service).
func (a recoveryView) Subscribe() (<-chan Event, func()) {
	in, stopIn := a.svc.Subscribe()
	out := make(chan Event, 16)
	stop := make(chan struct{})
	go func() {
		defer close(out)
		for ev := range in {
			for _, e := range a.events(ev) {
				select {
				case out <- e:
				case <-stop:
					return
				}
			}
		}
	}()
	var once sync.Once
	return out, func() { once.Do(func() { close(stop); stopIn() }) }
}

// events reads what ev names; a read that fails leaves its event out (a
// client reloads the state on the next one).
func (a recoveryView) events(ev recovery.Event) []Event {
	ctx := context.Background()
	var out []Event
	switch ev.Kind {
	case recovery.EventOperation:
		if op, err := a.Operation(ctx, ev.Operation); err == nil {
			out = append(out, Event{Type: "operation", Workspace: ev.Workspace, Data: op})
		}
	case recovery.EventHold:
		if hs, err := a.svc.AllHolds(); err == nil {
			for _, h := range hs {
				if h.ID == ev.Hold {
					out = append(out, Event{Type: "repair_hold", Workspace: ev.Workspace, Data: repairHold(h)})
				}
			}
		}
	case recovery.EventProcess:
		if ps, err := a.LostProcesses(ctx, ev.Workspace); err == nil {
			out = append(out, Event{Type: "process", Workspace: ev.Workspace, Data: ps})
		}
	}
	if st, err := a.stateNow(ctx, ev.Workspace); err == nil {
		out = append(out, Event{Type: "recovery_state", Workspace: ev.Workspace, Data: st})
	}
	return out
}

// stateNow is State without the on-use inspection: an event reports what
// is stored.
func (a recoveryView) stateNow(ctx context.Context, ws string) (RecoveryState, error) {
	return a.state(ctx, ws, false)
}
