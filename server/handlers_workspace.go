package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"lifeboat/providers"
	"lifeboat/recovery"
)

// workspaceView is a workspace as the API shows it: the lifecycle's record
// (without its change digest) and its recovery state.
type workspaceView struct {
	ID          string                     `json:"id"`
	Provider    string                     `json:"provider"`
	Instance    providers.InstanceID       `json:"instance"`
	Generation  uint64                     `json:"generation"`
	Created     time.Time                  `json:"created"`
	LastGood    *recovery.Checkpoint       `json:"last_good"`
	Native      *recovery.NativeCheckpoint `json:"native,omitempty"`
	Failures    int                        `json:"failures"`
	Records     []recovery.RecoveryRecord  `json:"records"`
	InFlight    *recovery.InFlight         `json:"in_flight,omitempty"`
	LastRestart *recovery.RestartRecord    `json:"last_restart,omitempty"`
	Settings    settingsView               `json:"settings"`
	Recovery    RecoveryState              `json:"recovery"`
}

// settingsView shows a workspace's effective intervals and which of them
// it sets itself (empty: the server's default).
type settingsView struct {
	ParkInterval        string `json:"park_interval"`
	PeriodicInterval    string `json:"periodic_interval"`
	OwnParkInterval     string `json:"own_park_interval,omitempty"`
	OwnPeriodicInterval string `json:"own_periodic_interval,omitempty"`
}

func ownInterval(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func (s *Server) view(ctx context.Context, w recovery.Workspace) (workspaceView, error) {
	st, err := s.api.State(ctx, w.ID)
	if err != nil {
		return workspaceView{}, err
	}
	recs := w.Recovery
	if recs == nil {
		recs = []recovery.RecoveryRecord{}
	}
	park, periodic := s.rec.Intervals(w)
	return workspaceView{ID: w.ID, Provider: w.Provider, Instance: w.Instance, Generation: w.Generation, Created: w.Created,
		LastGood: w.LastGood, Native: w.Native, Failures: w.Failures, Records: recs, InFlight: w.InFlight,
		LastRestart: w.LastRestart, Recovery: st,
		Settings: settingsView{ParkInterval: park.String(), PeriodicInterval: cmp.Or(ownInterval(periodic), "off"),
			OwnParkInterval: ownInterval(w.Settings.ParkInterval), OwnPeriodicInterval: ownInterval(w.Settings.PeriodicInterval)}}, nil
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request) error {
	wss, err := s.rec.Workspaces()
	if err != nil {
		return err
	}
	out := make([]workspaceView, 0, len(wss))
	for _, ws := range wss {
		v, err := s.view(r.Context(), ws)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workspace looks up the {ws} of the path.
func (s *Server) workspace(r *http.Request) (recovery.Workspace, error) {
	id := r.PathValue("ws")
	if err := recovery.ValidWorkspaceID(id); err != nil {
		return recovery.Workspace{}, err
	}
	return s.rec.Workspace(id)
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	v, err := s.view(r.Context(), ws)
	return reply(w, http.StatusOK, v, err)
}

func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	cps, err := s.rec.Checkpoints(ws.ID)
	return replyList(w, cps, err)
}

// botOperation checks that a capture or park may run on ws now: not while
// it is being recovered, and not for an older generation (the optional
// Lifeboat-Generation header is the generation the caller's instance has).
func (s *Server) botOperation(r *http.Request) (recovery.Workspace, error) {
	ws, err := s.workspace(r)
	if err != nil {
		return ws, err
	}
	if g := r.Header.Get("Lifeboat-Generation"); g != "" {
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil {
			return ws, badRequest(fmt.Sprintf("the Lifeboat-Generation header %q is not a generation number", g))
		}
		if n != ws.Generation {
			return ws, fmt.Errorf("workspace %s is at generation %d (instance %s); this request is for generation %d: %w",
				ws.ID, ws.Generation, ws.Instance, n, recovery.ErrStaleGeneration)
		}
	}
	st, err := s.api.State(r.Context(), ws.ID)
	if err != nil {
		return ws, err
	}
	if st.State == StateRecovering {
		return ws, fmt.Errorf("workspace %s: operation %s is recovering it; try again when it is done (watch /v1/events): %w",
			ws.ID, st.Operation, recovery.ErrRecovering)
	}
	return ws, nil
}

// captureNow takes a checkpoint now (or joins the one in flight). The
// capture is not cancelled if the client goes away; the answer is the
// receipt, whose outcome says what happened.
func (s *Server) captureNow(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.botOperation(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.rec.Capture(context.WithoutCancel(r.Context()), ws.ID, recovery.ReasonManual))
	return nil
}

// park captures before the sandbox is parked (throttled).
func (s *Server) park(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.botOperation(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.rec.Park(context.WithoutCancel(r.Context()), ws.ID))
	return nil
}
