package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"lifeboat/providers"
	"lifeboat/recovery/dirlock"
	"lifeboat/recovery/statedb"
)

// Hold is a repair hold: a copy-back into a replacement failed for good,
// so the source (the restored tree) and the replacement allocation are
// kept (retain_on_failure) until an operator resolves it. Nothing
// destroys a held allocation on its own.
type Hold struct {
	ID        string `json:"id"`
	Workspace string `json:"workspace"`
	Operation string `json:"operation"`
	Provider  string `json:"provider"`
	// Replacement is the allocation kept; Lost the instance it replaced.
	Replacement providers.InstanceID `json:"replacement"`
	Lost        providers.InstanceID `json:"lost"`
	Source      string               `json:"source"` // the restored tree kept on this host
	Checkpoint  string               `json:"checkpoint"`
	Class       dirlock.FailureClass `json:"class"`
	Attempts    int                  `json:"attempts"`
	Error       string               `json:"error"`
	Created     time.Time            `json:"created"`
	// Stop is the receipt of stopping the kept replacement, so it costs
	// nothing while it waits for an operator; nil before the attempt.
	Stop       *StopReceipt `json:"stop,omitempty"`
	Resolution *Resolution  `json:"resolution,omitempty"`
}

// StopReceipt says what stopping a held replacement did.
type StopReceipt struct {
	Time    time.Time `json:"time"`
	Stopped bool      `json:"stopped"`
	Detail  string    `json:"detail"` // the provider's answer, or why nothing was stopped
}

// Allocation is a held replacement as its provider reports it now.
type Allocation struct {
	Hold      string               `json:"hold"`
	Provider  string               `json:"provider"`
	Instance  providers.InstanceID `json:"instance"`
	State     providers.State      `json:"state,omitempty"` // as the provider reports it now
	Detail    string               `json:"detail"`
	Error     string               `json:"error,omitempty"` // the inspection failed
	CheckedAt time.Time            `json:"checked_at"`
	Stop      *StopReceipt         `json:"stop,omitempty"`
	Source    string               `json:"source"` // the restored tree kept on this host
}

// Resolution is an operator's answer to a hold.
type Resolution struct {
	Outcome  HoldOutcome `json:"outcome"`
	Evidence string      `json:"evidence"`
	Time     time.Time   `json:"time"`
}

// HoldOutcome says what the operator did with a held allocation.
type HoldOutcome string

const (
	// HoldDestroyed: the operator destroyed the replacement and removed
	// the source tree (or confirmed they are gone).
	HoldDestroyed HoldOutcome = "destroyed"
	// HoldRepaired: the operator completed the copy by hand and adopted
	// the replacement outside Lifeboat.
	HoldRepaired HoldOutcome = "repaired"
	// HoldKept: the operator keeps the allocation for investigation; the
	// hold is closed, the allocation stays theirs to manage.
	HoldKept HoldOutcome = "kept"
)

var (
	// ErrUnknownHold: no repair hold with that id.
	ErrUnknownHold = errors.New("unknown repair hold")
	// ErrHoldResolved: the hold was already resolved.
	ErrHoldResolved = errors.New("repair hold already resolved")
)

// holdAndFail ends op as failed and records a repair hold in the same
// transaction, keeping the replacement and the restored tree.
func (s *Service) holdAndFail(op Operation, p providers.Provider, cbe *dirlock.CopyBackError) error {
	now := s.clock.Now()
	h := Hold{ID: "hold-" + randomHex(8), Workspace: op.Workspace, Operation: op.ID, Provider: op.Provider,
		Replacement: op.Replacement, Lost: op.OldInstance, Source: op.LocalTree, Checkpoint: op.Checkpoint,
		Class: cbe.Class, Attempts: cbe.Attempts, Error: cbe.Error(), Created: now}
	err := s.advanceTx(op.ID, func(tx stateTx, op *Operation, w *Workspace) error {
		if err := putHold(tx, &h); err != nil {
			return err
		}
		op.State, op.Error, op.Hold, op.LastError = OpFailed, "repair hold "+h.ID+" keeps the replacement: "+cbe.Error(), h.ID, ""
		op.Action = "an operator resolves repair hold " + h.ID + ": check the kept replacement " + string(h.Replacement) +
			" (GET /v1/repair-holds/" + h.ID + " shows its state and stop receipt) and the restored tree at " + h.Source +
			", then resolve the hold as destroyed, repaired or kept. A new approval (new idempotency key) may recover the workspace meanwhile; the hold stays until resolved"
		if w.Operation == op.ID {
			w.Operation = ""
			s.failedHealth(w, op, HealthLost)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.publish(Event{Workspace: op.Workspace, Kind: EventHold, Hold: h.ID})
	_, err = s.StopHold(context.WithoutCancel(s.base), h.ID)
	if err != nil {
		s.log.Error("stopping the held replacement", "hold", h.ID, "err", err)
	}
	return nil
}

// StopHold stops the replacement a repair hold keeps, so it costs nothing
// while it waits, and records the receipt on the hold. A provider that
// cannot stop instances gets a receipt saying so. It may be called again
// (after a failed stop).
func (s *Service) StopHold(ctx context.Context, id string) (Hold, error) {
	h, err := s.Hold(id)
	if err != nil {
		return Hold{}, err
	}
	if h.Resolution != nil {
		return h, fmt.Errorf("%w: %s was resolved as %s; the allocation is the operator's", ErrHoldResolved, id, h.Resolution.Outcome)
	}
	rc := StopReceipt{Time: s.clock.Now()}
	p, perr := s.lc.provider(Workspace{ID: h.Workspace, Provider: h.Provider})
	st, ok := p.(interface {
		Stop(ctx context.Context, id providers.InstanceID) error
	})
	switch {
	case perr != nil:
		rc.Detail = "not stopped: " + perr.Error()
	case !ok:
		rc.Detail = "not stopped: provider " + h.Provider + " cannot stop instances (it keeps files only; nothing runs of its own)"
	default:
		if err := st.Stop(ctx, h.Replacement); err != nil {
			rc.Detail = "stopping failed: " + err.Error()
		} else {
			rc.Stopped, rc.Detail = true, "provider "+h.Provider+" stopped instance "+string(h.Replacement)
		}
	}
	err = s.store.updateTx(func(tx stateTx) error {
		got, err := getJSON[Hold](tx, statedb.Holds, id, "repair hold")
		if err != nil || got == nil {
			return cmpErr(err, fmt.Errorf("%w %q", ErrUnknownHold, id))
		}
		got.Stop = &rc
		h = *got
		return putHold(tx, got)
	})
	if err == nil {
		s.publish(Event{Workspace: h.Workspace, Kind: EventHold, Hold: h.ID})
	}
	return h, err
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Hold returns one repair hold, resolved or not.
func (s *Service) Hold(id string) (Hold, error) {
	var h Hold
	err := s.store.view(func(tx stateTx) error {
		got, err := getJSON[Hold](tx, statedb.Holds, id, "repair hold")
		if err == nil && got == nil {
			err = fmt.Errorf("%w %q", ErrUnknownHold, id)
		}
		if err == nil {
			h = *got
		}
		return err
	})
	return h, err
}

// Allocation inspects the replacement a repair hold keeps, so an operator
// can confirm it is stopped before recovering its files by hand.
func (s *Service) Allocation(ctx context.Context, id string) (Allocation, error) {
	h, err := s.Hold(id)
	if err != nil {
		return Allocation{}, err
	}
	a := Allocation{Hold: h.ID, Provider: h.Provider, Instance: h.Replacement, Stop: h.Stop, Source: h.Source, CheckedAt: s.clock.Now()}
	p, err := s.lc.provider(Workspace{ID: h.Workspace, Provider: h.Provider})
	if err != nil {
		a.Error = err.Error()
		return a, nil
	}
	st, err := p.Inspect(ctx, h.Replacement)
	if err != nil {
		a.Error = err.Error()
		return a, nil
	}
	a.State, a.Detail = st.State, st.Detail
	return a, nil
}

// RepairHolds returns every unresolved repair hold, oldest first.
func (s *Service) RepairHolds() ([]Hold, error) {
	all, err := s.AllHolds()
	return slices.DeleteFunc(all, func(h Hold) bool { return h.Resolution != nil }), err
}

// AllHolds returns every repair hold, resolved ones included, oldest first.
func (s *Service) AllHolds() ([]Hold, error) {
	out, err := listJSON[Hold](s.store, statedb.Holds, "repair hold %s", nil)
	slices.SortFunc(out, func(a, b Hold) int { return a.Created.Compare(b.Created) })
	return out, err
}

// ResolveHold records an operator's resolution of hold id. outcome is one
// of destroyed, repaired, kept; evidence (what was done, a ticket, a
// command's output) is required. With destroyed, the kept source tree on
// this host is removed; the replacement is never touched by Lifeboat.
func (s *Service) ResolveHold(id string, outcome HoldOutcome, evidence string) (Hold, error) {
	switch outcome {
	case HoldDestroyed, HoldRepaired, HoldKept:
	default:
		return Hold{}, fmt.Errorf("resolve repair hold %s: outcome %q: use destroyed, repaired or kept", id, outcome)
	}
	if evidence == "" {
		return Hold{}, fmt.Errorf("resolve repair hold %s: evidence is required (what was done, and how it was checked)", id)
	}
	var h Hold
	err := s.store.updateTx(func(tx stateTx) error {
		got, err := getJSON[Hold](tx, statedb.Holds, id, "repair hold")
		if err != nil {
			return err
		}
		if got == nil {
			return fmt.Errorf("%w %q", ErrUnknownHold, id)
		}
		if got.Resolution != nil {
			return fmt.Errorf("%w: %s was resolved as %s at %s", ErrHoldResolved, id, got.Resolution.Outcome, got.Resolution.Time.UTC().Format(time.RFC3339))
		}
		got.Resolution = &Resolution{Outcome: outcome, Evidence: evidence, Time: s.clock.Now()}
		h = *got
		return putHold(tx, got)
	})
	if err != nil {
		return Hold{}, err
	}
	if outcome == HoldDestroyed {
		_ = os.RemoveAll(h.Source)
	}
	s.publish(Event{Workspace: h.Workspace, Kind: EventHold, Hold: h.ID})
	return h, nil
}
