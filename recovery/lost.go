package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"lifeboat/providers"
	"lifeboat/recovery/statedb"
)

// LostSet is the processes recorded with the checkpoint a workspace was
// recovered from. None of them kept running: a recovery restores files,
// not processes.
type LostSet struct {
	Operation  string          `json:"operation"`
	Generation uint64          `json:"generation"` // the workspace generation the recovery made
	Checkpoint string          `json:"checkpoint"`
	Processes  []ProcessRecord `json:"processes"`
}

// LostProcess is one process reported after a recovery.
type LostProcess struct {
	Index int `json:"index"` // names it in RestartProcess
	ProcessRecord
	// State is "lost" until a restart ran, then "restarted".
	State string `json:"state"`
	// Restart is the action that restarts it: RestartProcess with this
	// index and a new idempotency key.
	Restart  string           `json:"restart"`
	Restarts []ProcessRestart `json:"restarts"`
}

// ProcessRestart is one restart request of a lost process.
type ProcessRestart struct {
	Key        string               `json:"key"`
	Workspace  string               `json:"workspace"`
	Index      int                  `json:"index"`
	Command    []string             `json:"command"`
	Instance   providers.InstanceID `json:"instance"`
	Generation uint64               `json:"generation"`
	// State: running (the command was started), done (it returned),
	// failed (it could not be run), interrupted (this lifeboat stopped
	// while it ran; it is not run again for this key).
	State    string    `json:"state"`
	ExitCode int       `json:"exit_code"`
	Output   string    `json:"output"` // the last output, bounded and redacted
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
}

// ErrNotRestartable: a lost process cannot be run again as recorded.
var ErrNotRestartable = errors.New("lost process cannot be restarted as recorded")

// LostProcesses returns the processes reported lost by the last recovery
// of workspace ws (none before one).
func (s *Service) LostProcesses(ws string) ([]LostProcess, error) {
	w, err := s.store.Workspace(ws)
	if err != nil || w.Lost == nil {
		return []LostProcess{}, err
	}
	restarts, err := s.restarts(ws, w.Lost.Generation)
	if err != nil {
		return nil, err
	}
	out := make([]LostProcess, 0, len(w.Lost.Processes))
	for i, p := range w.Lost.Processes {
		lp := LostProcess{Index: i, ProcessRecord: p, State: "lost", Restart: "restart", Restarts: []ProcessRestart{}}
		for _, r := range restarts {
			if r.Index == i {
				lp.Restarts = append(lp.Restarts, r)
				lp.State = "restarted"
			}
		}
		out = append(out, lp)
	}
	return out, nil
}

func (s *Service) restarts(ws string, gen uint64) ([]ProcessRestart, error) {
	return listJSON(s.store, statedb.Restarts, "process restart %q", func(r *ProcessRestart) bool { return r.Workspace == ws && r.Generation == gen })
}

// RestartProcess runs lost process index of workspace ws again in the
// workspace's current instance (provider Exec, the instance directory as
// working directory), on this explicit request only. key is the request's
// idempotency key: a repeated or concurrent request with the same key
// returns the first one's record and never runs the command twice, even
// across restarts (the record is stored before the command starts).
func (s *Service) RestartProcess(ctx context.Context, ws string, index int, key string) (ProcessRestart, error) {
	if key == "" || len(key) > 200 {
		return ProcessRestart{}, fmt.Errorf("restart process %d of %s: an idempotency key of 1 to 200 bytes is required", index, ws)
	}
	unlock := s.restart.Lock(key)
	defer unlock()
	// Among servers sharing the store, the lock is held while the command
	// runs: a record left running without it belongs to a process that died.
	unlockShared, _, err := s.store.db.Lock(ctx, restartLockName(key), true)
	if err != nil {
		return ProcessRestart{}, fmt.Errorf("restart process %d of %s: %w", index, ws, err)
	}
	defer unlockShared()
	var rec ProcessRestart
	started := false
	err = s.store.updateTx(func(tx stateTx) error {
		started = false
		got, err := getJSON[ProcessRestart](tx, statedb.Restarts, key, "process restart")
		if err != nil {
			return err
		}
		if got != nil {
			if got.Workspace != ws || got.Index != index {
				return fmt.Errorf("%w: key %q restarted process %d of %s", ErrKeyReused, key, got.Index, got.Workspace)
			}
			rec = *got
			return nil
		}
		w, err := getWS(tx, ws)
		if err != nil {
			return err
		}
		if err := guard(*w); err != nil {
			return err
		}
		if w.Lost == nil || index < 0 || index >= len(w.Lost.Processes) {
			return fmt.Errorf("restart process %d of %s: no such lost process (see the lost processes of the workspace)", index, ws)
		}
		if cmd := w.Lost.Processes[index].Command; slices.ContainsFunc(cmd, func(a string) bool { return strings.Contains(a, redacted) }) {
			return fmt.Errorf("%w: process %d of %s was recorded with parts of its command redacted (%q); start it again yourself, with its secrets",
				ErrNotRestartable, index, ws, cmd)
		}
		if w.Lost.Generation != w.Generation {
			return fmt.Errorf("%w: process %d was lost by generation %d, the workspace is at %d", ErrStaleGeneration, index, w.Lost.Generation, w.Generation)
		}
		rec = ProcessRestart{Key: key, Workspace: ws, Index: index, Command: w.Lost.Processes[index].Command,
			Instance: w.Instance, Generation: w.Generation, State: "running", Started: s.clock.Now()}
		started = true
		return putRestart(tx, &rec)
	})
	if err != nil || !started {
		return rec, err
	}
	w, err := s.store.Workspace(ws)
	var p providers.Provider
	if err == nil {
		p, err = s.lc.provider(w)
	}
	var res providers.ExecResult
	if err == nil {
		res, err = p.Exec(ctx, rec.Instance, rec.Command, nil)
	}
	rec.Finished, rec.State, rec.ExitCode = s.clock.Now(), "done", res.ExitCode
	if err != nil {
		rec.State, rec.Error = "failed", err.Error()
	}
	rec.Output = s.tail(append(append([]byte(nil), res.Stdout...), res.Stderr...))
	if perr := s.store.updateTx(func(tx stateTx) error { return putRestart(tx, &rec) }); perr != nil {
		return rec, perr
	}
	s.publish(Event{Workspace: ws, Kind: EventProcess})
	return rec, nil
}

// tail keeps the last TailBytes of out, redacted.
func (s *Service) tail(out []byte) string {
	p := &Process{max: s.lc.cfg.TailBytes}
	_, _ = p.Write(out)
	return p.record(s.lc.cfg.Redact).Tail
}

// markInterruptedRestarts records restarts a dead process left running:
// their commands may have run, so they are never run again for that key.
func (s *Service) markInterruptedRestarts() error {
	return s.store.updateTx(func(tx stateTx) error {
		var fix []ProcessRestart
		err := tx.List(statedb.Restarts, func(_ string, v []byte) error {
			var r ProcessRestart
			if err := decodeRecord(v, &r); err == nil && r.State == "running" && !s.restartRunning(r.Key) {
				r.State, r.Error = "interrupted", "the lifeboat process running it stopped before it returned; it was not run again"
				fix = append(fix, r)
			}
			return nil
		})
		for _, r := range fix {
			if err == nil {
				err = putRestart(tx, &r)
			}
		}
		return err
	})
}

func restartLockName(key string) string { return "restart/" + key }

// restartRunning reports whether another process of a shared store runs
// the restart with key now (it holds its lock).
func (s *Service) restartRunning(key string) bool {
	if !s.store.Shared() {
		return false
	}
	ctx, cancel := context.WithTimeout(s.base, txTimeout)
	defer cancel()
	unlock, _, err := s.store.db.Lock(ctx, restartLockName(key), false)
	if err != nil {
		return true
	}
	unlock()
	return false
}
