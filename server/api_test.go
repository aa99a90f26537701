package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat/recovery"
)

// TestWorkspacesCheckpointsPark: over a real lifecycle, a capture now
// through the API promotes a checkpoint that the workspace and checkpoint
// lists then show; a park right after is throttled.
func TestWorkspacesCheckpointsPark(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workspace("w1", map[string]string{"a.txt": "alpha", "dir/b.txt": "beta"})
	e.workspace("w2", map[string]string{"c.txt": "gamma"})

	var list []workspaceView
	e.ok(http.StatusOK, "GET", "/v1/workspaces", userToken, nil, &list)
	if len(list) != 2 || list[0].ID != "w1" || list[0].LastGood != nil || list[0].Recovery.State != StateHealthy || list[1].Instance != "inst-w2" {
		t.Fatalf("workspaces: %+v", list)
	}
	var cps []recovery.Checkpoint
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/checkpoints", userToken, nil, &cps)
	if len(cps) != 0 {
		t.Fatalf("checkpoints before any capture: %+v", cps)
	}

	var rec recovery.Receipt
	e.ok(http.StatusOK, "POST", "/v1/workspaces/w1/checkpoints", userToken, nil, &rec)
	if rec.Outcome != recovery.Captured || rec.Snapshot == "" || rec.Files != 2 || rec.Reason != recovery.ReasonManual {
		t.Fatalf("capture now: %+v", rec)
	}
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/checkpoints", userToken, nil, &cps)
	if len(cps) != 1 || cps[0].Snapshot != rec.Snapshot || cps[0].Files != 2 {
		t.Fatalf("checkpoints: %+v", cps)
	}
	var w workspaceView
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1", userToken, nil, &w)
	if w.LastGood == nil || w.LastGood.Snapshot != rec.Snapshot {
		t.Fatalf("workspace after capture: %+v", w)
	}
	var park recovery.Receipt
	e.ok(http.StatusOK, "POST", "/v1/workspaces/w1/park", userToken, nil, &park)
	if park.Outcome != recovery.Throttled || park.LastGood != rec.Snapshot {
		t.Fatalf("park after capture: %+v", park)
	}
	// The other workspace was not touched.
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w2/checkpoints", userToken, nil, &cps)
	if len(cps) != 0 {
		t.Fatalf("w2 checkpoints: %+v", cps)
	}
}

// TestWorkspaceErrors: an unknown workspace, a bad id, bad bodies.
func TestWorkspaceErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workspace("w1", map[string]string{"a": "a"})
	for _, p := range []string{"/v1/workspaces/nope", "/v1/workspaces/nope/checkpoints", "/v1/workspaces/nope/recovery",
		"/v1/workspaces/nope/processes"} {
		e.fails(http.StatusNotFound, "unknown_workspace", "GET", p, userToken, nil)
	}
	e.fails(http.StatusNotFound, "unknown_workspace", "POST", "/v1/workspaces/nope/checkpoints", userToken, nil)
	e.fails(http.StatusNotFound, "unknown_workspace", "POST", "/v1/workspaces/nope/park", userToken, nil)
	e.fails(http.StatusBadRequest, "bad_workspace_id", "GET", "/v1/workspaces/.hidden", userToken, nil)
	e.fails(http.StatusNotFound, "not_found", "GET", "/v1/operations/op-404", userToken, nil)
	e.fails(http.StatusConflict, "not_lost", "GET", "/v1/workspaces/w1/recovery/offer", userToken, nil)
	e.fails(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces/w1/recovery/approve", userToken,
		map[string]string{"checkpoint": "x", "extra": "y"}, "Idempotency-Key", "k1")
	e.fails(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces/w1/recovery/approve", userToken,
		map[string]string{}, "Idempotency-Key", "k1")
	e.fails(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces/w1/park", userToken, nil, "Lifeboat-Generation", "x")
}

// TestApproveIdempotent: an approval needs an idempotency key and the
// offered checkpoint; the same key, repeated or concurrent, gives the same
// operation, and only one is created.
func TestApproveIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workspace("w1", map[string]string{"a": "a"})
	at := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	e.rec.set(lost("w1", 3, "cp-good", at))

	var st RecoveryState
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/recovery", userToken, nil, &st)
	if st.State != StateLost || st.Offer == nil || st.Offer.Checkpoint != "cp-good" {
		t.Fatalf("state: %+v", st)
	}
	var o Offer
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/recovery/offer", userToken, nil, &o)
	if !o.Profile || len(o.NotRecoverable) != 3 || len(o.LostProcesses) != 1 || !o.CheckpointTime.Equal(at) {
		t.Fatalf("offer: %+v", o)
	}

	body := approveRequest{Checkpoint: "cp-good"}
	e.fails(http.StatusBadRequest, "idempotency_key_required", "POST", "/v1/workspaces/w1/recovery/approve", userToken, body)
	e.fails(http.StatusBadRequest, "bad_idempotency_key", "POST", "/v1/workspaces/w1/recovery/approve", userToken, body, "Idempotency-Key", "has space")
	e.fails(http.StatusConflict, "checkpoint_mismatch", "POST", "/v1/workspaces/w1/recovery/approve", userToken,
		approveRequest{Checkpoint: "cp-older"}, "Idempotency-Key", "k0")

	const n = 8
	ops := make([]Operation, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, b, h := e.do("POST", "/v1/workspaces/w1/recovery/approve", userToken, body, "Idempotency-Key", "key-1")
			if code != http.StatusAccepted {
				t.Errorf("approve %d: %d %s", i, code, b)
				return
			}
			must(t, json.Unmarshal(b, &ops[i]))
			if h.Get("Location") != "/v1/operations/"+ops[i].ID {
				t.Errorf("Location %q", h.Get("Location"))
			}
		})
	}
	wg.Wait()
	for i := range ops {
		if ops[i].ID != ops[0].ID || ops[i].IdempotencyKey != "key-1" || ops[i].Checkpoint != "cp-good" {
			t.Fatalf("approval %d: %+v, first %+v", i, ops[i], ops[0])
		}
	}
	if e.rec.approvals != 1 {
		t.Fatalf("%d operations created for one key", e.rec.approvals)
	}
	var op Operation
	e.ok(http.StatusOK, "GET", "/v1/operations/"+ops[0].ID, userToken, nil, &op)
	if op.ID != ops[0].ID || op.Generation != 3 {
		t.Fatalf("operation: %+v", op)
	}
	// A second key while it runs is refused; the same key for another
	// checkpoint too.
	e.fails(http.StatusConflict, "recovering", "POST", "/v1/workspaces/w1/recovery/approve", userToken, body, "Idempotency-Key", "key-2")
	e.fails(http.StatusUnprocessableEntity, "idempotency_key_reused", "POST", "/v1/workspaces/w1/recovery/approve", userToken,
		approveRequest{Checkpoint: "cp-other"}, "Idempotency-Key", "key-1")
	if e.rec.approvals != 1 {
		t.Fatalf("%d operations", e.rec.approvals)
	}
}

// TestBotOperationsWhileRecovering: capture and park answer "recovering"
// while an operation runs, and "stale_generation" for an older
// generation; nothing is captured.
func TestBotOperationsWhileRecovering(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workspace("w1", map[string]string{"a": "a"})
	e.rec.set(recovery.WorkspaceState{Workspace: "w1", Health: &recovery.Health{State: recovery.HealthRecovering},
		Operation: &recovery.Operation{ID: "op-9", Workspace: "w1", State: recovery.OpCreating}}, nil)
	for _, p := range []string{"/v1/workspaces/w1/checkpoints", "/v1/workspaces/w1/park"} {
		ae := e.fails(http.StatusConflict, "recovering", "POST", p, userToken, nil)
		if !strings.Contains(ae.Message, "op-9") {
			t.Fatalf("message does not name the operation: %s", ae.Message)
		}
	}
	e.rec.set(recovery.WorkspaceState{Workspace: "w1", Health: &recovery.Health{State: recovery.HealthOK}}, nil)
	e.fails(http.StatusConflict, "stale_generation", "POST", "/v1/workspaces/w1/checkpoints", userToken, nil, "Lifeboat-Generation", "7")
	var cps []recovery.Checkpoint
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/checkpoints", userToken, nil, &cps)
	if len(cps) != 0 {
		t.Fatalf("captured while refused: %+v", cps)
	}
	var rec recovery.Receipt
	e.ok(http.StatusOK, "POST", "/v1/workspaces/w1/checkpoints", userToken, nil, &rec, "Lifeboat-Generation", "0")
	if rec.Outcome != recovery.Captured {
		t.Fatalf("capture at the current generation: %+v", rec)
	}
}

// TestProcessRestartIdempotent: lost processes are listed with their last
// output; a restart needs a key and a repeated request starts it once.
func TestProcessRestartIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workspace("w1", map[string]string{"a": "a"})
	e.rec.procs["w1"] = []recovery.LostProcess{{Index: 0, ProcessRecord: recovery.ProcessRecord{Command: []string{"npm", "run", "dev"}, Tail: "ready"},
		State: "lost"}}
	var ps []LostProcess
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/processes", userToken, nil, &ps)
	if len(ps) != 1 || ps[0].LastOutput != "ready" || ps[0].State != "lost" {
		t.Fatalf("processes: %+v", ps)
	}
	e.fails(http.StatusBadRequest, "idempotency_key_required", "POST", "/v1/workspaces/w1/processes/0/restart", userToken, nil)
	for range 3 {
		var r ProcessRestart
		e.ok(http.StatusAccepted, "POST", "/v1/workspaces/w1/processes/0/restart", userToken, nil, &r, "Idempotency-Key", "r-1")
		if r.Process != "0" || r.IdempotencyKey != "r-1" || r.State != "restarting" {
			t.Fatalf("restart: %+v", r)
		}
	}
	if e.rec.runs[0] != 1 {
		t.Fatalf("the command ran %d times for one key", e.rec.runs[0])
	}
	e.fails(http.StatusNotFound, "not_found", "POST", "/v1/workspaces/w1/processes/9/restart", userToken, nil, "Idempotency-Key", "r-2")
}

// TestRepairHoldResolution: an operator resolves a hold with an outcome
// and evidence, once; the resolution names the operator's token label.
func TestRepairHoldResolution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.rec.holds["h1"] = recovery.Hold{ID: "h1", Workspace: "w1", Lost: "old-7", Replacement: "new-8"}
	e.fails(http.StatusBadRequest, "bad_request", "POST", "/v1/repair-holds/h1/resolve", operatorToken, resolveRequest{Outcome: "copied_back"})
	e.fails(http.StatusNotFound, "not_found", "POST", "/v1/repair-holds/h9/resolve", operatorToken, resolveRequest{"copied_back", "x"})
	var h RepairHold
	e.ok(http.StatusOK, "POST", "/v1/repair-holds/h1/resolve", operatorToken, resolveRequest{"copied_back", "sha256 of every file matched"}, &h)
	if h.Resolution == nil || h.Resolution.Operator != "ops-alice" || h.Resolution.Evidence != "sha256 of every file matched" {
		t.Fatalf("hold: %+v", h)
	}
	e.fails(http.StatusConflict, "hold_resolved", "POST", "/v1/repair-holds/h1/resolve", operatorToken, resolveRequest{"discarded", "y"})
}

// noProviders is a recovery service with no provider instance configured.
type noProviders struct{ RecoveryService }

func (noProviders) ProviderNames() []string { return nil }

// Registering a workspace on a provider the server does not have names
// the ones it has; a server with none says to add a [providers.NAME]
// table, rather than listing nothing.
func TestRegisterUnknownProvider(t *testing.T) {
	reg := map[string]string{"id": "bot1", "provider": "box9", "instance": "i"}
	e := newEnv(t)
	if ae := e.fails(http.StatusBadRequest, "unknown_provider", "POST", "/v1/workspaces", operatorToken, reg); !strings.Contains(ae.Message, `"box9" is not configured in this server; configured: local`) {
		t.Fatalf("unknown provider: %s", ae.Message)
	}
	e = newEnvWith(t, func(e *env) RecoveryService { return noProviders{e.rec} })
	if ae := e.fails(http.StatusBadRequest, "unknown_provider", "POST", "/v1/workspaces", operatorToken, reg); !strings.Contains(ae.Message, "add a [providers.NAME] table") {
		t.Fatalf("unknown provider on a server without providers: %s", ae.Message)
	}
}
