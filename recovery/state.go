package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"lifeboat/backend"
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

// publish sends e to this process's subscribers and, on a shared store,
// to every other server's (through the store).
func (s *Service) publish(e Event) {
	e.Time = s.clock.Now()
	s.deliver(e)
	if !s.store.Shared() {
		return
	}
	b, err := json.Marshal(e)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), eventTimeout)
		err = s.store.db.Publish(ctx, s.store.owner, b)
		cancel()
	}
	if err != nil {
		s.log.Warn("sending an event to the other servers (their clients see the change at their next read)", "workspace", e.Workspace, "kind", e.Kind, "err", err)
	}
}

// eventTimeout bounds sending one event to the other servers.
const eventTimeout = 5 * time.Second

func (s *Service) deliver(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// listen delivers the events other servers of a shared store publish
// after it returns to this process's subscribers, until the service
// closes.
func (s *Service) listen() error {
	done, err := s.store.db.Listen(s.base, s.store.owner, func(b []byte) {
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			s.log.Warn("an event from another server does not decode", "err", err)
			return
		}
		s.deliver(e)
	})
	if err != nil {
		return fmt.Errorf("receiving the other servers' events: %w", err)
	}
	s.wg.Go(func() { <-done })
	return nil
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
	// Candidates are the checkpoints an approval may name, newest first:
	// the last good one, then earlier ones (for when it is damaged or
	// gone), each with whether it can be read now.
	Candidates []Candidate `json:"candidates"`
	// Warning says why Checkpoint is not the last good checkpoint.
	Warning string `json:"warning,omitempty"`
}

// Candidate is a checkpoint an approval may name.
type Candidate struct {
	Checkpoint string    `json:"checkpoint"`
	Time       time.Time `json:"time"`
	AgeText    string    `json:"age"`
	Reason     Reason    `json:"reason"`
	Files      uint64    `json:"files"`
	Bytes      uint64    `json:"bytes"`
	LastGood   bool      `json:"last_good"`
	Readable   bool      `json:"readable"`
	Problem    string    `json:"problem,omitempty"` // why it cannot be read
}

// maxCandidates bounds the earlier checkpoints an offer lists.
const maxCandidates = 10

// Offer returns the recovery offer of a lost workspace (ErrNotLost when
// it is not lost, ErrRecovering while an operation runs). It names the
// last good checkpoint, or, when that cannot be read, the newest earlier
// checkpoint that can (Warning says so).
func (s *Service) Offer(ctx context.Context, ws string) (Offer, error) {
	w, err := s.store.Workspace(ws)
	if err != nil {
		return Offer{}, err
	}
	if err := offerable(&w); err != nil {
		return Offer{}, err
	}
	now := s.clock.Now()
	// One piece of repository work: every candidate's readability, then
	// the picked checkpoint's contents. The newest candidate whose
	// manifest and trees can be read is picked.
	var cands []Candidate
	var info SnapshotInfo
	var pick *Checkpoint
	err = s.lc.repoWork(ctx, func() error {
		var err error
		if cands, err = s.candidates(ctx, w, now); err != nil {
			return err
		}
		for i := range cands {
			if !cands[i].Readable {
				continue
			}
			if info, err = s.cfg.Restorer.Describe(ctx, cands[i].Checkpoint); err != nil {
				cands[i].Readable, cands[i].Problem = false, err.Error()
				continue
			}
			if i == 0 {
				pick = w.LastGood
			} else if pick, err = s.checkpoint(ws, cands[i].Checkpoint); err != nil {
				return err
			}
			return nil
		}
		return nil
	})
	if err != nil {
		return Offer{}, err
	}
	if pick == nil {
		return Offer{}, fmt.Errorf("workspace %s: no checkpoint can be read: the last good one %s: %s; run `lifeboat check --read-data` on the repository",
			ws, short(w.LastGood.Snapshot), cands[0].Problem)
	}
	warning := ""
	if pick != w.LastGood {
		warning = fmt.Sprintf("the last good checkpoint %s (taken %s) cannot be read (%s); the offer names the newest earlier checkpoint that can",
			short(w.LastGood.Snapshot), w.LastGood.Time.UTC().Format(time.RFC3339), cands[0].Problem)
	}
	age := now.Sub(pick.Time)
	o := Offer{Workspace: ws, LostInstance: w.Instance, Checkpoint: pick.Snapshot, Time: pick.Time,
		Age: age, AgeText: age.Round(time.Second).String(), Files: pick.Files, Bytes: pick.Bytes,
		BrowserProfile: len(info.Profiles) > 0, Profiles: info.Profiles, ProfileLocked: info.ProfileLocked,
		LostProcesses: append([]ProcessRecord{}, pick.Processes...), Candidates: cands, Warning: warning,
		NotRecoverable: []string{
			"running processes: none keeps running; each recorded one is reported lost with a restart action",
			"every change made after the checkpoint (" + pick.Time.UTC().Format(time.RFC3339) + ")",
			"provider-side state outside the workspace files: installed packages, services, network settings, the instance's id",
		}}
	if o.Profiles == nil {
		o.Profiles = []string{}
	}
	if info.ProfileLocked {
		o.NotRecoverable = append(o.NotRecoverable, "browser profiles: the key of this lifeboat cannot open the sensitive tier")
	}
	o.NotRecoverable = append(o.NotRecoverable, s.fidelity(ctx, w, info.Contents)...)
	return o, nil
}

// fidelity says what of the checkpoint's contents the workspace's
// provider cannot hold in a replacement.
func (s *Service) fidelity(ctx context.Context, w Workspace, c Contents) []string {
	var out []string
	if c.Skipped.N > 0 {
		out = append(out, "sockets and device nodes "+c.Skipped.String()+": never captured (only recorded), so never restored")
	}
	p, err := s.lc.provider(w)
	if err != nil {
		return append(out, "the provider "+w.Provider+" is not configured: "+err.Error())
	}
	var fs providers.FileSupport
	if f, ok := p.(providers.FileSupporter); ok {
		if fs, err = f.FileSupport(ctx); err != nil {
			return append(out, "what provider "+w.Provider+" can hold could not be asked ("+err.Error()+"): hard links, extended attributes, named pipes and holes in sparse files may not come back")
		}
	}
	name := "provider " + w.Provider
	if c.HardLinks.N > 0 && !fs.HardLinks {
		out = append(out, "hard links "+c.HardLinks.String()+": "+name+" writes each name as a separate copy")
	}
	if c.Xattrs.N > 0 && !fs.Xattrs {
		out = append(out, "extended attributes of "+c.Xattrs.String()+": "+name+" cannot set them")
	}
	if c.Fifos.N > 0 && !fs.Fifos {
		out = append(out, "named pipes "+c.Fifos.String()+": "+name+" cannot create them")
	}
	if !fs.Sparse {
		out = append(out, "holes of sparse files: "+name+" writes them out as zeros (the content is the same; it takes more space)")
	}
	if !fs.Ownership {
		out = append(out, "file owners: files belong to the user "+name+" writes as")
	}
	return out
}

// candidates lists the last good checkpoint and the newest earlier ones,
// each checked for readability (the caller runs it as repository work).
func (s *Service) candidates(ctx context.Context, w Workspace, now time.Time) ([]Candidate, error) {
	hist, err := s.store.Checkpoints(w.ID)
	if err != nil {
		return nil, err
	}
	// An earlier checkpoint whose snapshot is gone from the repository
	// (retention or forget removed it) is no candidate; the last good one
	// is listed whatever its state.
	var out []Candidate
	add := func(cp Checkpoint, lastGood bool) {
		c := Candidate{Checkpoint: cp.Snapshot, Time: cp.Time, AgeText: now.Sub(cp.Time).Round(time.Second).String(),
			Reason: cp.Reason, Files: cp.Files, Bytes: cp.Bytes, LastGood: lastGood, Readable: true}
		if err := s.cfg.Restorer.Check(ctx, cp.Snapshot); err != nil {
			if !lastGood && errors.Is(err, backend.ErrNotFound) {
				return
			}
			c.Readable, c.Problem = false, err.Error()
		}
		out = append(out, c)
	}
	add(*w.LastGood, true)
	for i := len(hist) - 1; i >= 0 && len(out) <= maxCandidates && ctx.Err() == nil; i-- {
		if hist[i].Snapshot != w.LastGood.Snapshot && hist[i].Time.Before(w.LastGood.Time) {
			add(hist[i], false)
		}
	}
	return out, ctx.Err()
}

// checkpoint returns the checkpoint of ws whose snapshot is snap, from its
// history.
func (s *Service) checkpoint(ws, snap string) (*Checkpoint, error) {
	var cp *Checkpoint
	err := s.store.view(func(tx stateTx) error {
		var err error
		cp, err = findCheckpoint(tx, ws, snap)
		return err
	})
	if err == nil && cp == nil {
		err = fmt.Errorf("%w: workspace %s has no checkpoint %s", ErrStaleOffer, ws, snap)
	}
	return cp, err
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
