package managedagents

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/httpapi"
	"lifeboat/providers/managedagents/matest"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// The contract server (matest) follows DigitalOcean's API reference for
// Harness Runtime sessions (/v2/agents/sessions/...), see its package doc.

func start(t *testing.T) (*matest.Server, *Provider) {
	srv := matest.Start(t, "tok")
	return srv, New(Config{Token: "tok", BaseURL: srv.URL})
}

func wantState(t *testing.T, p *Provider, id providers.InstanceID, want providers.State) {
	t.Helper()
	st, err := p.Inspect(context.Background(), id)
	if err != nil || st.State != want || st.ObservedAt.IsZero() {
		t.Fatalf("Inspect(%s) = %+v, %v; want %s", id, st, err, want)
	}
}

func TestInspectStates(t *testing.T) {
	srv, p := start(t)
	ctx := context.Background()
	id := providers.InstanceID(srv.Add("sess_a", "state"))
	wantState(t, p, id, providers.Running)
	wantState(t, p, "sess_a", providers.Running) // a bare session id
	for status, want := range map[string]providers.State{
		"SESSION_STATUS_DETACHED": providers.Running, "SESSION_STATUS_PAUSED": providers.Stopped,
		"SESSION_STATUS_DESTROYED": providers.Missing, "READY": providers.Running,
	} {
		srv.Update("sess_a", func(s *matest.Session) { s.Status = status })
		wantState(t, p, id, want)
	}
	for _, status := range []string{"SESSION_STATUS_PROVISIONING", "SESSION_STATUS_DESTROYING", "SESSION_STATUS_FAILED", "SESSION_STATUS_UNSPECIFIED"} {
		srv.Update("sess_a", func(s *matest.Session) { s.Status = status })
		_, err := p.Inspect(ctx, id)
		providertest.WantKind(t, "Inspect of a session "+status, err, providers.KindConflict)
	}
	srv.Update("sess_a", func(s *matest.Session) { s.Status, s.SandboxID = "SESSION_STATUS_READY", "sbx-other" })
	_, err := p.Inspect(ctx, id)
	providertest.WantKind(t, "Inspect after a rollback outside Lifeboat", err, providers.KindConflict)
	if !strings.Contains(err.Error(), "sbx-other") {
		t.Fatalf("the conflict does not name the new sandbox: %v", err)
	}
	srv.Remove("sess_a")
	wantState(t, p, id, providers.Missing)
	_, err = p.Inspect(ctx, "a/b/c")
	providertest.WantKind(t, "Inspect of a malformed id", err, providers.KindInvalid)
}

// TestCheckpointRollback: a checkpoint, a change, a rollback onto a fresh
// sandbox that has the checkpoint's state; the new instance id names the
// new sandbox; deleting twice is fine; a deleted checkpoint cannot be
// rolled back to; a turn in flight refuses a checkpoint as a conflict.
func TestCheckpointRollback(t *testing.T) {
	srv, p := start(t)
	ctx := context.Background()
	id := providers.InstanceID(srv.Add("sess_a", "v1"))
	cp, err := p.Checkpoint(ctx, id)
	if err != nil || !strings.HasPrefix(string(cp), "sess_a/cp_") {
		t.Fatalf("Checkpoint = %q, %v", cp, err)
	}
	srv.Update("sess_a", func(s *matest.Session) { s.Data = "v2" })
	after, err := p.Rollback(ctx, id, cp)
	if err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	ss, _ := srv.Get("sess_a")
	if ss.Data != "v1" || after != providers.InstanceID("sess_a/"+ss.SandboxID) || after == id {
		t.Fatalf("after Rollback: instance %s, session %+v", after, ss)
	}
	wantState(t, p, after, providers.Running)
	_, err = p.Inspect(ctx, id)
	providertest.WantKind(t, "Inspect of the sandbox rolled away from", err, providers.KindConflict)
	for i := range 2 {
		if err := p.DeleteCheckpoint(ctx, cp); err != nil {
			t.Fatalf("DeleteCheckpoint #%d: %v", i+1, err)
		}
	}
	if ss, _ := srv.Get("sess_a"); len(ss.Checkpoints) != 0 {
		t.Fatalf("checkpoints left: %v", ss.Checkpoints)
	}
	_, err = p.Rollback(ctx, after, cp)
	providertest.WantKind(t, "Rollback to a deleted checkpoint", err, providers.KindConflict)
	_, err = p.Rollback(ctx, after, "sess_other/cp_1")
	providertest.WantKind(t, "Rollback to another session's checkpoint", err, providers.KindInvalid)
	srv.Update("sess_a", func(s *matest.Session) { s.TurnActive = true })
	_, err = p.Checkpoint(ctx, after)
	providertest.WantKind(t, "Checkpoint during a turn", err, providers.KindConflict)
	srv.Remove("sess_a")
	if err := p.DeleteCheckpoint(ctx, cp); err != nil {
		t.Fatalf("DeleteCheckpoint of a removed session's checkpoint: %v", err)
	}
	_, err = p.Checkpoint(ctx, after)
	providertest.WantKind(t, "Checkpoint of a removed session", err, providers.KindConflict)
}

// TestStatusMapping: the API's answers map to kinds for every call;
// Inspect says Missing only for the 404 of the session GET; a rate limit
// carries Retry-After, else DigitalOcean's ratelimit-reset.
func TestStatusMapping(t *testing.T) {
	srv, p := start(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	id := providers.InstanceID(srv.Add("sess_a", "v1"))
	cases := []struct {
		status int
		header map[string]string
		want   providers.Kind
		wait   time.Duration
	}{
		{400, nil, providers.KindInvalid, 0},
		{401, nil, providers.KindUnauthorized, 0},
		{403, nil, providers.KindUnauthorized, 0},
		{409, nil, providers.KindConflict, 0},
		{422, nil, providers.KindInvalid, 0},
		{429, map[string]string{"Retry-After": "9"}, providers.KindRateLimited, 9 * time.Second},
		{429, map[string]string{"Ratelimit-Reset": strconv.FormatInt(now.Add(42*time.Second).Unix(), 10)}, providers.KindRateLimited, 42 * time.Second},
		{429, map[string]string{"Ratelimit-Reset": strconv.FormatInt(now.Add(30*24*time.Hour).Unix(), 10)}, providers.KindRateLimited, httpapi.MaxRetryAfter},
		{429, map[string]string{"Ratelimit-Reset": "9223372036854775807"}, providers.KindRateLimited, httpapi.MaxRetryAfter},
		{429, nil, providers.KindRateLimited, 0},
		{500, nil, providers.KindUnavailable, 0},
		{501, nil, providers.KindUnsupported, 0},
		{502, nil, providers.KindUnavailable, 0},
		{503, nil, providers.KindUnavailable, 0},
	}
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		srv.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
			for k, v := range c.header {
				w.Header().Set(k, v)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			fmt.Fprintf(w, `{"id":"code_%d","message":"contract fault"}`, c.status)
			return true
		})
		st, err := p.Inspect(ctx, id)
		if st.State == providers.Missing {
			t.Fatalf("%d answered as Missing", c.status)
		}
		providertest.WantKind(t, fmt.Sprintf("Inspect answered %d", c.status), err, c.want)
		if d, _ := providers.RetryAfter(err); d != c.wait {
			t.Fatalf("%d %v: RetryAfter %v, want %v", c.status, c.header, d, c.wait)
		}
		_, err = p.Checkpoint(ctx, id)
		providertest.WantKind(t, fmt.Sprintf("Checkpoint answered %d", c.status), err, c.want)
		_, err = p.Rollback(ctx, id, cp)
		providertest.WantKind(t, fmt.Sprintf("Rollback answered %d", c.status), err, c.want)
		providertest.WantKind(t, fmt.Sprintf("DeleteCheckpoint answered %d", c.status), p.DeleteCheckpoint(ctx, cp), c.want)
		providertest.WantKind(t, fmt.Sprintf("Pause answered %d", c.status), p.Pause(ctx, id), c.want)
	}
	srv.SetFault(nil)
	wantState(t, p, id, providers.Running)
	if ss, _ := srv.Get("sess_a"); ss.Data != "v1" || len(ss.Checkpoints) != 1 {
		t.Fatalf("a fault changed the session: %+v", ss)
	}
	_, err = New(Config{Token: "wrong-token", BaseURL: srv.URL}).Inspect(ctx, id)
	providertest.WantKind(t, "Inspect with a wrong token", err, providers.KindUnauthorized)
	if strings.Contains(err.Error(), "wrong-token") {
		t.Fatalf("the error carries the token: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	srv, p := start(t)
	ctx := context.Background()
	id := providers.InstanceID(srv.Add("sess_a", "v1"))
	if err := p.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantState(t, p, id, providers.Stopped)
	if err := p.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantState(t, p, id, providers.Running)
}

// TestUnreachableAndUnsupported: a down API or a timeout is unavailable,
// never missing; a cancelled context wraps context.Canceled; files, exec
// and create are unsupported, as Capabilities says.
func TestUnreachableAndUnsupported(t *testing.T) {
	srv, p := start(t)
	ctx := context.Background()
	id := providers.InstanceID(srv.Add("sess_a", "v1"))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	u := New(Config{Token: "tok", BaseURL: down.URL})
	_, err := u.Inspect(ctx, id)
	providertest.WantKind(t, "Inspect while unreachable", err, providers.KindUnavailable)
	_, err = u.Checkpoint(ctx, id)
	providertest.WantKind(t, "Checkpoint while unreachable", err, providers.KindUnavailable)
	providertest.WantKind(t, "DeleteCheckpoint while unreachable", u.DeleteCheckpoint(ctx, "sess_a/cp_1"), providers.KindUnavailable)

	release := make(chan struct{})
	srv.SetFault(platformtest.Hang(release))
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = p.Inspect(tctx, id)
	cancel()
	close(release)
	providertest.WantKind(t, "Inspect timing out", err, providers.KindUnavailable)
	srv.SetFault(nil)
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = p.Inspect(cctx, id)
	providertest.WantKind(t, "Inspect with a cancelled context", err, providers.KindUnavailable)

	if c := p.Capabilities(); c.Files || c.Exec || c.Create || !c.NativeCheckpoints || !c.Pause {
		t.Fatalf("Capabilities = %+v", c)
	}
	_, err = p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles", err, providers.KindUnsupported)
	_, err = p.Exec(ctx, id, []string{"true"}, nil)
	providertest.WantKind(t, "Exec", err, providers.KindUnsupported)
	_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	providertest.WantKind(t, "Create", err, providers.KindUnsupported)
}
