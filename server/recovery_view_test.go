package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"lifeboat/internal/ssetest"
	"lifeboat/recovery"
)

// newRecoveryEnv is a server over the real recovery service (the local
// provider, a real repository) through NewRecovery.
func newRecoveryEnv(t *testing.T) (*env, *recovery.Service) {
	t.Helper()
	var svc *recovery.Service
	e := newEnvWith(t, func(e *env) RecoveryService {
		var err error
		svc, err = recovery.NewService(recovery.ServiceConfig{Lifecycle: e.life, Restorer: &recovery.RepoRestorer{Repo: e.repo}, StateDir: e.dir})
		must(t, err)
		t.Cleanup(svc.Close)
		return NewRecovery(svc)
	})
	return e, svc
}

// streamData decodes the data of a stream event's message.
func streamData(t *testing.T, ev ssetest.Event, v any) {
	t.Helper()
	var m struct {
		Data json.RawMessage `json:"data"`
	}
	must(t, json.Unmarshal([]byte(ev.Data), &m))
	must(t, json.Unmarshal(m.Data, v))
}

// TestRecoveryEndToEnd: a workspace with files is captured, its instance
// directory is removed, the service's check finds it lost; over HTTP with
// a user token the state and the offer show the checkpoint, an approval
// sent twice with one key is one operation, the event stream follows it
// to recovered, and the replacement holds the files under the same
// workspace id.
func TestRecoveryEndToEnd(t *testing.T) {
	e, svc := newRecoveryEnv(t)
	ctx := context.Background()
	files := map[string]string{"a.txt": "alpha", "dir/b.txt": "beta"}
	e.workspace("w1", files)
	if _, err := e.life.StartProcess("w1", []string{"sh", "-c", "echo again > restarted.txt"}, "."); err != nil {
		t.Fatal(err)
	}

	var st RecoveryState
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/recovery", userToken, nil, &st)
	if st.State != StateHealthy || st.NextCheck == nil || st.Instance != "inst-w1" || st.Offer != nil {
		t.Fatalf("state on first use (inspected): %+v", st)
	}
	e.fails(http.StatusConflict, "not_lost", "GET", "/v1/workspaces/w1/recovery/offer", userToken, nil)
	// The stream opens before the capture: the capture's receipt reaches
	// the stream after the HTTP answer, so it is read here, in order.
	stream := e.stream(userToken, "")
	stream.must(t, "hello")
	var rec recovery.Receipt
	e.ok(http.StatusOK, "POST", "/v1/workspaces/w1/checkpoints", userToken, nil, &rec)
	if rec.Outcome != recovery.Captured {
		t.Fatalf("capture: %+v", rec)
	}
	var evRec recovery.Receipt
	// The first GET's recovery_state (healthy) is relayed asynchronously and
	// may reach the stream, opened after it, before the receipt.
	streamData(t, stream.mustAfter(t, "receipt", "recovery_state"), &evRec)
	if evRec.Snapshot != rec.Snapshot {
		t.Fatalf("receipt event %+v, capture answered %+v", evRec, rec)
	}
	must(t, os.RemoveAll(filepath.Join(e.root, "inst-w1")))
	if h, err := svc.Check(ctx, "w1"); err != nil || h.State != recovery.HealthLost {
		t.Fatalf("check after the instance was removed: %+v %v", h, err)
	}
	var evState RecoveryState
	streamData(t, stream.must(t, "recovery_state"), &evState)
	if evState.Workspace != "w1" || evState.State != StateLost || evState.Offer == nil || evState.Offer.Checkpoint != rec.Snapshot {
		t.Fatalf("recovery_state event after the check: %+v", evState)
	}

	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/recovery", userToken, nil, &st)
	if st.State != StateLost || st.Offer == nil || st.Offer.Checkpoint != rec.Snapshot {
		t.Fatalf("state when lost: %+v", st)
	}
	var offer Offer
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/recovery/offer", userToken, nil, &offer)
	if offer.Checkpoint != rec.Snapshot || offer.Workspace != "w1" || len(offer.NotRecoverable) == 0 || len(offer.LostProcesses) != 1 ||
		offer.LostProcesses[0].ID != "0" || offer.LostProcesses[0].State != "lost" {
		t.Fatalf("offer: %+v", offer)
	}
	if offer.Files == 0 || offer.Bytes == 0 || offer.Profile || offer.Profiles == nil || len(offer.Profiles) != 0 || offer.ProfileLocked {
		t.Fatalf("offer's size and profiles: files %d, bytes %d, profile %t %v, locked %t", offer.Files, offer.Bytes, offer.Profile, offer.Profiles, offer.ProfileLocked)
	}
	stale := "00" + rec.Snapshot[2:]
	if stale == rec.Snapshot { // one id in 256 starts with 00
		stale = "11" + rec.Snapshot[2:]
	}
	e.fails(http.StatusConflict, "checkpoint_mismatch", "POST", "/v1/workspaces/w1/recovery/approve", userToken,
		approveRequest{Checkpoint: stale}, "Idempotency-Key", "k-stale")

	var op1, op2 Operation
	approve := approveRequest{Checkpoint: offer.Checkpoint}
	e.ok(http.StatusAccepted, "POST", "/v1/workspaces/w1/recovery/approve", userToken, approve, &op1, "Idempotency-Key", "k-approve-1")
	e.ok(http.StatusAccepted, "POST", "/v1/workspaces/w1/recovery/approve", userToken, approve, &op2, "Idempotency-Key", "k-approve-1")
	if op1.ID == "" || op2.ID != op1.ID || op1.Workspace != "w1" || op1.Checkpoint != rec.Snapshot || op1.IdempotencyKey != "k-approve-1" {
		t.Fatalf("two approvals with one key: %+v %+v", op1, op2)
	}
	e.fails(http.StatusUnprocessableEntity, "idempotency_key_reused", "POST", "/v1/workspaces/w1/recovery/approve", userToken,
		approveRequest{Checkpoint: stale}, "Idempotency-Key", "k-approve-1")

	// Follow the stream until the operation ends.
	var last Operation
	for last.Step != "recovered" {
		ev, err := stream.next()
		if err != nil {
			t.Fatalf("event stream ended before the operation did: %v", err)
		}
		if ev.Type != "operation" {
			continue
		}
		streamData(t, ev, &last)
		if last.ID != op1.ID || last.Step == "failed" {
			t.Fatalf("operation event: %+v", last)
		}
	}
	if got, err := svc.Wait(ctx, op1.ID); err != nil || got.State != recovery.OpRecovered {
		t.Fatalf("wait: %+v %v", got, err)
	}
	var op Operation
	e.ok(http.StatusOK, "GET", "/v1/operations/"+op1.ID, userToken, nil, &op)
	if op.Step != "recovered" || op.NewInstance == "" || op.NewInstance == "inst-w1" || op.Error != "" {
		t.Fatalf("operation: %+v", op)
	}
	var w workspaceView
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1", userToken, nil, &w)
	if w.ID != "w1" || string(w.Instance) != op.NewInstance || w.Generation <= op.Generation ||
		w.Recovery.State != StateHealthy || w.Recovery.Operation != op.ID {
		t.Fatalf("workspace after recovery: %+v", w)
	}
	for name, body := range files {
		b, err := os.ReadFile(filepath.Join(e.root, op.NewInstance, name))
		if err != nil || string(b) != body {
			t.Fatalf("%s in the replacement: %q %v", name, b, err)
		}
	}
	var ps []LostProcess
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/processes", userToken, nil, &ps)
	if len(ps) != 1 || ps[0].ID != "0" || ps[0].State != "lost" || ps[0].Command[0] != "sh" {
		t.Fatalf("lost processes: %+v", ps)
	}
	var r1, r2 ProcessRestart
	e.ok(http.StatusAccepted, "POST", "/v1/workspaces/w1/processes/0/restart", userToken, nil, &r1, "Idempotency-Key", "k-r")
	e.ok(http.StatusAccepted, "POST", "/v1/workspaces/w1/processes/0/restart", userToken, nil, &r2, "Idempotency-Key", "k-r")
	if r1.Process != "0" || r1.State != "restarted" || r1.IdempotencyKey != "k-r" || r1.ExitCode == nil || *r1.ExitCode != 0 || !reflect.DeepEqual(r1, r2) {
		t.Fatalf("two restarts with one key: %+v %+v", r1, r2)
	}
	if b, err := os.ReadFile(filepath.Join(e.root, op.NewInstance, "restarted.txt")); err != nil || string(b) != "again\n" {
		t.Fatalf("the restarted process's output file: %q %v", b, err)
	}
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/processes", userToken, nil, &ps)
	if len(ps) != 1 || ps[0].State != "restarted" {
		t.Fatalf("lost processes after the restart: %+v", ps)
	}
	for {
		ev, err := stream.next()
		if err != nil {
			t.Fatalf("event stream: waiting for the process event: %v", err)
		}
		if ev.Type == "process" {
			streamData(t, ev, &ps)
			if len(ps) != 1 || ps[0].State != "restarted" {
				t.Fatalf("process event: %+v", ps)
			}
			break
		}
	}
	e.fails(http.StatusNotFound, "not_found", "POST", "/v1/workspaces/w1/processes/1/restart", userToken, nil, "Idempotency-Key", "k-r1")
	e.fails(http.StatusNotFound, "not_found", "GET", "/v1/operations/op-nope", userToken, nil)
	e.fails(http.StatusNotFound, "not_found", "POST", "/v1/repair-holds/hold-nope/resolve", operatorToken,
		resolveRequest{Outcome: "discarded", Evidence: "checked"})
	e.fails(http.StatusBadRequest, "bad_request", "POST", "/v1/repair-holds/hold-nope/resolve", operatorToken,
		resolveRequest{Outcome: "burnt", Evidence: "checked"})
}

// TestRecoveryViewMapping: the translations that the end-to-end run
// does not reach: each recovery error's stable code, rolling_back and waiting
// steps, failed after a failed operation, hold outcomes and operators.
func TestRecoveryViewMapping(t *testing.T) {
	t.Parallel()
	for err, code := range map[error]string{recovery.ErrNotLost: "not_lost", recovery.ErrNoCheckpoint: "not_lost",
		recovery.ErrStaleOffer: "checkpoint_mismatch", recovery.ErrKeyReused: "idempotency_key_reused",
		recovery.ErrRecovering: "recovering", recovery.ErrStaleGeneration: "stale_generation",
		recovery.ErrUnknownOperation: "not_found", recovery.ErrUnknownHold: "not_found", recovery.ErrUnknownProcess: "not_found",
		recovery.ErrHoldResolved: "hold_resolved", recovery.ErrUnknownWorkspace: "unknown_workspace"} {
		wrapped := fmt.Errorf("context: %w", err)
		if got := toAPIError(wrapped); got.Code != code || got.Message != wrapped.Error() {
			t.Errorf("%v: answered %+v, want code %s with the error's own message", err, got, code)
		}
	}

	rb := operation(recovery.Operation{ID: "op-1", State: recovery.OpRollingBack, Error: "restore failed"})
	if rb.Step != "failed" || rb.Error != "restore failed (the replacement is being destroyed)" {
		t.Errorf("rolling back: %+v", rb)
	}
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	wait := operation(recovery.Operation{ID: "op-2", State: recovery.OpCreating, LastError: "provider down", RetryAt: at})
	if wait.Step != "creating" || wait.Error != "waiting until 2026-11-30T01:00:00Z to try again: provider down" {
		t.Errorf("waiting: %+v", wait)
	}

	h := repairHold(recovery.Hold{ID: "hold-1", Workspace: "w1", Operation: "op-1", Lost: "inst-w1", Replacement: "inst-new",
		Source: "/state/recovery/op-1", Class: "after_write", Attempts: 3, Error: "disk full",
		Resolution: &recovery.Resolution{Outcome: recovery.HoldDestroyed, Evidence: "[by ops-alice] destroyed it, ticket 7", Time: at}})
	if h.SourceInstance != "inst-w1" || h.TargetInstance != "inst-new" || h.Resolution == nil || h.Resolution.Operator != "ops-alice" ||
		h.Resolution.Evidence != "destroyed it, ticket 7" || h.Resolution.Outcome != "destroyed" {
		t.Errorf("hold: %+v %+v", h, h.Resolution)
	}
	for in, want := range map[string]recovery.HoldOutcome{"copied_back": recovery.HoldRepaired, "discarded": recovery.HoldDestroyed,
		"escalated": recovery.HoldKept, "kept": recovery.HoldKept} {
		if holdOutcomes[in] != want {
			t.Errorf("outcome %s: %s", in, holdOutcomes[in])
		}
	}
}

// TestRecoveryFailedState: an approved recovery whose checkpoint cannot be
// restored (its data packs are gone) ends failed; the workspace is then
// shown failed, the operation failed with the reason.
func TestRecoveryFailedState(t *testing.T) {
	t.Parallel()
	e, svc := newRecoveryEnv(t)
	ctx := context.Background()
	e.workspace("w1", map[string]string{"a.txt": "alpha"})
	var rec recovery.Receipt
	e.ok(http.StatusOK, "POST", "/v1/workspaces/w1/checkpoints", userToken, nil, &rec)
	must(t, os.RemoveAll(filepath.Join(e.root, "inst-w1")))
	if h, err := svc.Check(ctx, "w1"); err != nil || h.State != recovery.HealthLost {
		t.Fatalf("check: %+v %v", h, err)
	}
	var offer Offer
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/recovery/offer", userToken, nil, &offer)
	packs, err := filepath.Glob(filepath.Join(e.rdir, "data", "*", "*"))
	must(t, err)
	if len(packs) == 0 {
		t.Fatal("no data packs in the repository")
	}
	for _, p := range packs {
		must(t, os.Remove(p))
	}
	var op Operation
	e.ok(http.StatusAccepted, "POST", "/v1/workspaces/w1/recovery/approve", userToken, approveRequest{Checkpoint: offer.Checkpoint}, &op,
		"Idempotency-Key", "k-fail")
	if got, err := svc.Wait(ctx, op.ID); err != nil || got.State != recovery.OpFailed {
		t.Fatalf("wait: %+v %v", got, err)
	}
	e.ok(http.StatusOK, "GET", "/v1/operations/"+op.ID, userToken, nil, &op)
	if op.Step != "failed" || op.Error == "" {
		t.Fatalf("operation: %+v", op)
	}
	var st RecoveryState
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/recovery", userToken, nil, &st)
	if st.State != StateFailed || st.Operation != op.ID || st.Action == "" {
		t.Fatalf("state after a failed recovery: %+v", st)
	}
}
