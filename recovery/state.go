package recovery

import (
	"context"
	"time"

	"lifeboat/providers"
)

// EventKind says what changed.
type EventKind string

const (
	EventHealth    EventKind = "health"    // a workspace's health state changed
	EventOperation EventKind = "operation" // a recovery operation moved to another state
	EventHold      EventKind = "hold"      // a repair hold was recorded or resolved
	EventProcess   EventKind = "process"   // a lost process was restarted
)

// Event is one state change, for subscribers (the server's event stream).
// It names what changed; the subscriber reads the current state with
// State, Operation or RepairHolds.
type Event struct {
	Workspace string      `json:"workspace"`
	Kind      EventKind   `json:"kind"`
	State     HealthState `json:"state,omitempty"`
	Operation string      `json:"operation,omitempty"`
	OpState   OpState     `json:"op_state,omitempty"`
	Hold      string      `json:"hold,omitempty"`
	Time      time.Time   `json:"time"`
}

// Subscribe returns a channel of state changes and a function that ends
// the subscription. A subscriber that falls more than 64 events behind
// loses the excess (it can always re-read the state); the service never
// waits for a subscriber.
func (s *Service) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, 64)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
	}
}

func (s *Service) publish(e Event) {
	e.Time = s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// Offer is what a user sees before approving a recovery.
type Offer struct {
	Workspace    string               `json:"workspace"`
	LostInstance providers.InstanceID `json:"lost_instance"`
	Checkpoint   string               `json:"checkpoint"` // snapshot id to name in the approval
	Time         time.Time            `json:"time"`
	Age          time.Duration        `json:"age_ns"`
	AgeText      string               `json:"age"`
	Files        uint64               `json:"files"`
	Bytes        uint64               `json:"bytes"`
	// BrowserProfile: the checkpoint holds browser profiles (Profiles).
	BrowserProfile bool     `json:"browser_profile"`
	Profiles       []string `json:"profiles"`
	// ProfileLocked: the profiles are in the sensitive tier and this
	// lifeboat's key cannot open it; only the files would come back.
	ProfileLocked bool `json:"profile_locked"`
	// NotRecoverable lists what a recovery cannot bring back.
	NotRecoverable []string `json:"not_recoverable"`
	// LostProcesses will be reported lost after the recovery.
	LostProcesses []ProcessRecord `json:"lost_processes"`
}

// Offer returns the recovery offer of a lost workspace (ErrNotLost when
// it is not lost, ErrRecovering while an operation runs).
func (s *Service) Offer(ctx context.Context, ws string) (Offer, error) {
	w, err := s.store.Workspace(ws)
	if err != nil {
		return Offer{}, err
	}
	if err := offerable(&w); err != nil {
		return Offer{}, err
	}
	info, err := s.cfg.Restorer.Describe(ctx, w.LastGood.Snapshot)
	if err != nil {
		return Offer{}, err
	}
	now := s.clock.Now()
	age := now.Sub(w.LastGood.Time)
	o := Offer{Workspace: ws, LostInstance: w.Instance, Checkpoint: w.LastGood.Snapshot, Time: w.LastGood.Time,
		Age: age, AgeText: age.Round(time.Second).String(), Files: w.LastGood.Files, Bytes: w.LastGood.Bytes,
		BrowserProfile: len(info.Profiles) > 0, Profiles: info.Profiles, ProfileLocked: info.ProfileLocked,
		LostProcesses: append([]ProcessRecord{}, w.LastGood.Processes...),
		NotRecoverable: []string{
			"running processes: none keeps running; each recorded one is reported lost with a restart action",
			"every change made after the checkpoint (" + w.LastGood.Time.UTC().Format(time.RFC3339) + ")",
			"provider-side state outside the workspace files: installed packages, services, network settings, the instance's id",
		}}
	if o.Profiles == nil {
		o.Profiles = []string{}
	}
	if info.ProfileLocked {
		o.NotRecoverable = append(o.NotRecoverable, "browser profiles: the key of this lifeboat cannot open the sensitive tier")
	}
	return o, nil
}

// WorkspaceState is everything a client shows about one workspace.
type WorkspaceState struct {
	Workspace  string               `json:"workspace"`
	Provider   string               `json:"provider"`
	Instance   providers.InstanceID `json:"instance"`
	Generation uint64               `json:"generation"`
	Health     *Health              `json:"health"` // nil before the first inspection
	LastGood   *Checkpoint          `json:"last_good"`
	// Operation is the running operation, else the newest one; nil if none.
	Operation *Operation `json:"operation"`
	Holds     []Hold     `json:"holds"` // unresolved repair holds
}

// State returns the recovery state of workspace ws.
func (s *Service) State(ws string) (WorkspaceState, error) {
	w, err := s.store.Workspace(ws)
	if err != nil {
		return WorkspaceState{}, err
	}
	st := WorkspaceState{Workspace: w.ID, Provider: w.Provider, Instance: w.Instance, Generation: w.Generation,
		Health: w.Health, LastGood: w.LastGood, Holds: []Hold{}}
	ops, err := s.store.Operations(ws)
	if err != nil {
		return st, err
	}
	for i := range ops {
		if w.Operation == "" || ops[i].ID == w.Operation {
			st.Operation = &ops[i]
		}
	}
	holds, err := s.RepairHolds()
	for _, h := range holds {
		if h.Workspace == ws {
			st.Holds = append(st.Holds, h)
		}
	}
	return st, err
}
