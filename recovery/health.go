package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"lifeboat/providers"
)

// HealthState is what Lifeboat last learned about a workspace's instance.
type HealthState string

const (
	// HealthOK: the provider reported the instance running or stopped.
	HealthOK HealthState = "ok"
	// HealthLost: the provider confirmed the instance no longer exists.
	// Only this state offers recovery.
	HealthLost HealthState = "lost"
	// HealthUnreachable: the provider could not be reached (outage,
	// timeout). Nothing is created, destroyed or replaced.
	HealthUnreachable HealthState = "unreachable"
	// HealthAuthFailed: the provider refused Lifeboat's credentials.
	HealthAuthFailed HealthState = "auth_failed"
	// HealthRateLimited: the provider asked Lifeboat to slow down.
	HealthRateLimited HealthState = "rate_limited"
	// HealthCheckFailed: the provider gave another error (a conflict, a
	// bad request); the detail says which.
	HealthCheckFailed HealthState = "check_failed"
	// HealthRecovering: an approved recovery operation is running.
	HealthRecovering HealthState = "recovering"
)

// Health is the result of the last inspection of a workspace's instance.
type Health struct {
	State     HealthState          `json:"state"`
	Instance  providers.InstanceID `json:"instance"` // the instance inspected
	Detail    string               `json:"detail"`   // the provider's words or error
	Action    string               `json:"action"`   // what the user or operator can do
	CheckedAt time.Time            `json:"checked_at"`
	NextCheck time.Time            `json:"next_check"` // when the schedule inspects again
	Since     time.Time            `json:"since"`      // when this state began
}

// healthOf maps one Inspect answer to a Health. Only a nil error with
// State Missing gives HealthLost.
func healthOf(w Workspace, st providers.Status, err error, now time.Time, every time.Duration) Health {
	h := Health{Instance: w.Instance, CheckedAt: now, NextCheck: now.Add(every)}
	next := h.NextCheck.UTC().Format(time.RFC3339)
	switch providers.KindOf(err) {
	case "":
		if err != nil {
			h.State, h.Detail = HealthCheckFailed, err.Error()
			h.Action = "inspecting the instance failed inside Lifeboat; nothing was changed; see the detail, next check at " + next
			return h
		}
	case providers.KindUnavailable:
		h.State, h.Detail = HealthUnreachable, err.Error()
		h.Action = "the provider could not be reached; nothing was created, destroyed or replaced; Lifeboat checks again at " + next
		return h
	case providers.KindUnauthorized:
		h.State, h.Detail = HealthAuthFailed, err.Error()
		h.Action = "the provider refused Lifeboat's credentials; fix them in the provider configuration; nothing was changed; next check at " + next
		return h
	case providers.KindRateLimited:
		if d, ok := providers.RetryAfter(err); ok && d > every {
			h.NextCheck = now.Add(d)
			next = h.NextCheck.UTC().Format(time.RFC3339)
		}
		h.State, h.Detail = HealthRateLimited, err.Error()
		h.Action = "the provider is rate limiting Lifeboat; nothing was changed; Lifeboat checks again at " + next
		return h
	default:
		h.State, h.Detail = HealthCheckFailed, err.Error()
		h.Action = "the provider refused the inspection; nothing was changed; see the detail, next check at " + next
		return h
	}
	h.Detail = st.Detail
	if st.State != providers.Missing {
		h.State, h.Action = HealthOK, ""
		return h
	}
	h.State = HealthLost
	if w.LastGood == nil {
		h.Action = "the provider confirmed the instance is gone, and there is no checkpoint to recover from"
	} else {
		h.Action = "the provider confirmed the instance is gone; review the recovery offer and approve the checkpoint it names to restore it into a replacement"
	}
	return h
}

// Check inspects the instance of workspace ws now (on use) and records
// what it found. It never creates, destroys or replaces anything. While a
// recovery operation runs it only reports the state. An inspection cut
// short by ctx records nothing.
func (s *Service) Check(ctx context.Context, ws string) (Health, error) {
	w, err := s.store.Workspace(ws)
	if err != nil {
		return Health{}, err
	}
	if w.Operation != "" && w.Health != nil {
		return *w.Health, nil
	}
	p, err := s.lc.provider(w)
	if err != nil {
		return Health{}, err
	}
	st, ierr := p.Inspect(ctx, w.Instance)
	if ierr != nil && ctx.Err() != nil {
		// The inspection was called off (a client gone, the server
		// stopping): the provider's silence says nothing about the instance.
		return Health{}, fmt.Errorf("checking workspace %s: %w", ws, context.Cause(ctx))
	}
	if ierr == nil && st.State == "" {
		ierr = fmt.Errorf("provider %s answered an empty state for %s", p.Name(), w.Instance)
	}
	now := s.clock.Now()
	h := healthOf(w, st, ierr, now, s.cfg.CheckInterval)
	changed := false
	err = s.store.update(ws, func(_ stateTx, cur *Workspace) error {
		if cur.Operation != "" || cur.Instance != w.Instance || cur.Generation != w.Generation {
			// Recovered or being recovered since: this answer is about
			// an instance the workspace no longer uses.
			if cur.Health != nil {
				h = *cur.Health
			}
			return errStale
		}
		h.Since = now
		if cur.Health != nil && cur.Health.State == h.State {
			h.Since = cur.Health.Since
		}
		changed = cur.Health == nil || cur.Health.State != h.State
		cur.Health = &h
		return nil
	})
	if errors.Is(err, errStale) {
		return h, nil
	}
	if err != nil {
		return Health{}, err
	}
	if changed {
		s.lc.SyncHold(context.WithoutCancel(ctx), ws) // a lost workspace holds every checkpoint an offer may name
		s.publish(Event{Workspace: ws, Kind: EventHealth, State: h.State})
	}
	return h, nil
}

var errStale = errors.New("stale inspection")

// CheckDue is one scheduled round: every workspace whose next check is
// due (or that was never checked) is inspected, each in one of the
// lifecycle's MaxChecks check slots, captures a dead process left in
// flight are recorded as interrupted, and recovery operations waiting on a
// provider error are resumed.
func (s *Service) CheckDue(ctx context.Context) {
	wss, err := s.store.Workspaces()
	if err != nil {
		s.log.Error("scheduled check: reading workspaces", "err", err)
		return
	}
	now := s.clock.Now()
	due := slices.DeleteFunc(wss, func(w Workspace) bool {
		return w.Operation != "" || (w.Health != nil && now.Before(w.Health.NextCheck))
	})
	inSlots(s.lc.check, len(due), func(i int, release func()) {
		defer release()
		if ctx.Err() != nil {
			return // shutting down: an unanswered inspection is no finding
		}
		if _, err := s.Check(ctx, due[i].ID); err != nil {
			s.log.Warn("scheduled check", "workspace", due[i].ID, "err", err)
		}
	})
	// Captures a dead process left marked in flight (a server that was
	// killed) are recorded as interrupted.
	if err := s.lc.interruptStale(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("scheduled check: recording interrupted captures", "err", err)
	}
	// Operations are resumed first: nothing in the holds' pass below may
	// keep a lapsed operation from being taken over.
	s.resume(true)
	// Holds whose write failed are written again, one removed by hand
	// comes back, holds of removed workspaces go.
	if err := s.lc.SyncHolds(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("scheduled check: the workspaces' holds in the repository", "err", err)
	}
}

// Run calls CheckDue every CheckInterval (on the service's clock) until
// ctx ends or the service is closed.
func (s *Service) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.base.Done():
			return nil
		case <-s.clock.After(s.cfg.CheckInterval):
			s.CheckDue(ctx)
		}
	}
}
