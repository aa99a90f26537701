package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"lifeboat/recovery"
)

// auditLines returns the log's audit lines, in order.
func (e *env) auditLines() []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			e.t.Fatalf("not a JSON log line: %q", line)
		}
		if m["msg"] == "audit" {
			if m["level"] != "INFO" {
				e.t.Fatalf("audit line not at info: %s", line)
			}
			out = append(out, m)
		}
	}
	return out
}

// TestAuditLog: every state-changing request (POST, PATCH, DELETE) writes
// exactly one audit line at info, refused ones included: who (role and
// token label), what (method, path, workspace, idempotency key) and the
// result (status and error code). A GET writes none, and no line holds a
// token or its hash.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	e := newLostEnv(t)
	e.rec.mu.Lock()
	e.rec.holds["h1"] = recovery.Hold{ID: "h1", Workspace: "w1"}
	e.rec.mu.Unlock()

	e.ok(http.StatusOK, "GET", "/v1/workspaces", userToken, nil, nil)
	e.ok(http.StatusCreated, "POST", "/v1/workspaces", userToken, addWorkspaceRequest{ID: "a", Provider: "local", Instance: "inst-a"}, nil)
	e.ok(http.StatusAccepted, "POST", "/v1/workspaces/w1/recovery/approve", userToken, approveRequest{"cp-good"}, nil, "Idempotency-Key", "approve-7")
	e.fails(http.StatusForbidden, "forbidden", "POST", "/v1/repair-holds/h1/resolve", userToken, resolveRequest{"discarded", "checked"})
	e.ok(http.StatusOK, "POST", "/v1/repair-holds/h1/resolve", operatorToken, resolveRequest{"discarded", "checked"}, nil)
	e.fails(http.StatusUnauthorized, "unauthorized", "DELETE", "/v1/workspaces/a", userToken+"wrong", nil)
	e.fails(http.StatusBadRequest, "bad_request", "PATCH", "/v1/workspaces/a", userToken, map[string]any{"bogus": 1})
	e.ok(http.StatusOK, "DELETE", "/v1/workspaces/a", operatorToken, nil, nil)

	type line struct{ role, who, method, path, ws, key, code string }
	want := []line{
		{"user", "inbox", "POST", "/v1/workspaces", "a", "", ""},
		{"user", "inbox", "POST", "/v1/workspaces/w1/recovery/approve", "w1", "approve-7", ""},
		{"user", "inbox", "POST", "/v1/repair-holds/h1/resolve", "", "", "forbidden"},
		{"operator", "ops-alice", "POST", "/v1/repair-holds/h1/resolve", "", "", ""},
		{"none", "", "DELETE", "/v1/workspaces/a", "a", "", "unauthorized"},
		{"user", "inbox", "PATCH", "/v1/workspaces/a", "a", "", "bad_request"},
		{"operator", "ops-alice", "DELETE", "/v1/workspaces/a", "a", "", ""},
	}
	status := []float64{201, 202, 403, 200, 401, 400, 200}
	got := e.auditLines()
	if len(got) != len(want) {
		t.Fatalf("%d audit lines, want %d:\n%s", len(got), len(want), e.logs.String())
	}
	for i, m := range got {
		l := line{m["role"].(string), m["who"].(string), m["method"].(string), m["path"].(string), m["workspace"].(string),
			m["idempotency_key"].(string), m["code"].(string)}
		if l != want[i] || m["status"] != status[i] {
			t.Errorf("audit line %d: %+v status %v, want %+v status %v", i, l, m["status"], want[i], status[i])
		}
	}
	for _, secret := range []string{userToken, operatorToken, HashToken(userToken)[7:], HashToken(operatorToken)[7:], "Bearer"} {
		if strings.Contains(e.logs.String(), secret) {
			t.Fatalf("the log holds %q", secret)
		}
	}
}
