package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestNoRecovery: a server without a recovery service shows every
// workspace as unchecked, still captures, and refuses recovery actions
// with 503 recovery_unavailable.
func TestNoRecovery(t *testing.T) {
	e := newEnv(t)
	e.workspace("w1", map[string]string{"a": "a"})
	srv, err := New(Config{Recovery: &NoRecovery{Lifecycle: e.life}, Tokens: e.srv.tokens})
	must(t, err)
	e.http = httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); e.http.Close() })

	var list []workspaceView
	e.ok(http.StatusOK, "GET", "/v1/workspaces", userToken, nil, &list)
	if len(list) != 1 || list[0].Recovery.State != StateUnchecked || list[0].Recovery.Instance != "inst-w1" {
		t.Fatalf("workspaces: %+v", list)
	}
	e.ok(http.StatusOK, "POST", "/v1/workspaces/w1/checkpoints", userToken, nil, nil)
	e.fails(http.StatusServiceUnavailable, "recovery_unavailable", "GET", "/v1/workspaces/w1/recovery/offer", userToken, nil)
	e.fails(http.StatusServiceUnavailable, "recovery_unavailable", "POST", "/v1/workspaces/w1/recovery/approve", userToken,
		approveRequest{"x"}, "Idempotency-Key", "k")
	e.fails(http.StatusServiceUnavailable, "recovery_unavailable", "POST", "/v1/workspaces/w1/processes/p/restart", userToken, nil, "Idempotency-Key", "k")
	e.fails(http.StatusNotFound, "unknown_workspace", "GET", "/v1/workspaces/w9/processes", userToken, nil)
	var ps []LostProcess
	e.ok(http.StatusOK, "GET", "/v1/workspaces/w1/processes", userToken, nil, &ps)
	var hs []RepairHold
	e.ok(http.StatusOK, "GET", "/v1/repair-holds", operatorToken, nil, &hs)
	if len(ps) != 0 || len(hs) != 0 {
		t.Fatalf("processes %v holds %v", ps, hs)
	}
}
