package recovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"lifeboat/providers"
	"lifeboat/recovery/dirlock"
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
	Resolution  *Resolution          `json:"resolution,omitempty"`
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
	h := Hold{ID: "hold-" + randomHex(8), Workspace: op.Workspace, Operation: op.ID, Provider: p.Name(),
		Replacement: op.Replacement, Lost: op.OldInstance, Source: op.LocalTree, Checkpoint: op.Checkpoint,
		Class: cbe.Class, Attempts: cbe.Attempts, Error: cbe.Error(), Created: now}
	err := s.advanceTx(op.ID, func(tx *boltTx, op *Operation, w *Workspace) error {
		if err := putJSON(tx, bucketHolds, h.ID, &h); err != nil {
			return err
		}
		op.State, op.Error, op.Hold, op.LastError = OpFailed, "copy-back failed; repair hold "+h.ID+" keeps the replacement: "+cbe.Error(), h.ID, ""
		if w.Operation == op.ID {
			w.Operation = ""
			s.failedHealth(w, op, HealthLost)
		}
		return nil
	})
	if err == nil {
		s.publish(Event{Workspace: op.Workspace, Kind: EventHold, Hold: h.ID})
	}
	return err
}

// RepairHolds returns every unresolved repair hold, oldest first.
func (s *Service) RepairHolds() ([]Hold, error) {
	all, err := s.AllHolds()
	return slices.DeleteFunc(all, func(h Hold) bool { return h.Resolution != nil }), err
}

// AllHolds returns every repair hold, resolved ones included, oldest first.
func (s *Service) AllHolds() ([]Hold, error) {
	var out []Hold
	err := s.store.db.View(func(tx *boltTx) error {
		return tx.Bucket(bucketHolds).ForEach(func(k, v []byte) error {
			var h Hold
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("state store: repair hold %s does not decode: %w", k, err)
			}
			out = append(out, h)
			return nil
		})
	})
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
	err := s.store.db.Update(func(tx *boltTx) error {
		got, err := getJSON[Hold](tx, bucketHolds, id, "repair hold")
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
		return putJSON(tx, bucketHolds, id, got)
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
