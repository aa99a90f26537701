package server

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/recovery"
)

// TestNoTokenNoAccess: every route that needs a role refuses a request
// without a token, with a malformed header, or with an unknown token;
// unknown paths too (nothing is told about what exists).
func TestNoTokenNoAccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workspace("w1", map[string]string{"a.txt": "a"})
	paths := map[string]string{"{ws}": "w1", "{id}": "x", "{proc}": "p1"}
	checked := 0
	for _, rt := range e.srv.Routes() {
		if rt.Role == RoleNone {
			continue
		}
		p := rt.Path
		for k, v := range paths {
			p = strings.ReplaceAll(p, k, v)
		}
		for _, auth := range []string{"", "Bearer", "Bearer " + userToken + "x", "Basic " + userToken, "bearer  "} {
			code, b, h := e.doAuth(rt.Method, p, auth)
			if code != http.StatusUnauthorized || !strings.Contains(string(b), `"code":"unauthorized"`) || h.Get("WWW-Authenticate") == "" {
				t.Fatalf("%s %s with Authorization %q: %d %s", rt.Method, p, auth, code, b)
			}
			checked++
		}
	}
	if checked < 13*5 {
		t.Fatalf("only %d requests checked", checked)
	}
	e.fails(http.StatusUnauthorized, "unauthorized", "GET", "/v1/nothing-here", "", nil)
	e.fails(http.StatusUnauthorized, "unauthorized", "DELETE", "/v1/workspaces", "", nil)
	// With a token: the same unknown path is a structured 404, a wrong method 405.
	e.fails(http.StatusNotFound, "no_such_route", "GET", "/v1/nothing-here", userToken, nil)
	if code, _, h := e.do("DELETE", "/v1/workspaces", userToken, nil); code != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, POST" {
		t.Fatalf("DELETE /v1/workspaces: %d, Allow %q", code, h.Get("Allow"))
	}
}

func (e *env) doAuth(method, path, auth string) (int, []byte, http.Header) {
	e.t.Helper()
	if auth == "" {
		return e.do(method, path, "", nil)
	}
	return e.do(method, path, "", nil, "Authorization", auth)
}

// TestOperatorOnly: repair holds are listed and resolved only with an
// operator token; a user token gets 403 forbidden and changes nothing.
func TestOperatorOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.rec.holds["h1"] = recovery.Hold{ID: "h1", Workspace: "w1", Operation: "op-1", Lost: "old-7", Replacement: "new-8", Error: "copy-back failed"}
	e.fails(http.StatusForbidden, "forbidden", "GET", "/v1/repair-holds", userToken, nil)
	e.fails(http.StatusForbidden, "forbidden", "POST", "/v1/repair-holds/h1/resolve", userToken, resolveRequest{"copied_back", "diffed"})
	if e.rec.holds["h1"].Resolution != nil {
		t.Fatal("a user token resolved a hold")
	}
	var hs []RepairHold
	e.ok(http.StatusOK, "GET", "/v1/repair-holds", operatorToken, nil, &hs)
	if len(hs) != 1 || hs[0].SourceInstance != "old-7" || hs[0].TargetInstance != "new-8" {
		t.Fatalf("holds: %+v", hs)
	}
	// An operator may do what a user may.
	var list []workspaceView
	e.ok(http.StatusOK, "GET", "/v1/workspaces", operatorToken, nil, &list)
}

// TestTokenFile: the file format, and its errors naming the line.
func TestTokenFile(t *testing.T) {
	t.Parallel()
	good := "# comment\n\nuser " + HashToken("a") + " inbox\noperator " + HashToken("b") + "\n"
	tk, err := ParseTokens("f", []byte(good))
	must(t, err)
	for tok, want := range map[string]Role{"a": RoleUser, "b": RoleOperator, "c": RoleNone, "": RoleNone} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		if got, _ := tk.match(r); got != want {
			t.Errorf("token %q: role %v, want %v", tok, got, want)
		}
	}
	for _, c := range []struct{ text, want string }{
		{"", "no tokens"},
		{"admin " + HashToken("a"), "line 1: unknown role"},
		{"user a", "line 1: the hash is not sha256"},
		{"user " + "sha256:abcd", "line 1: the hash"},
		{"user", "line 1: want a role"},
		{"user " + HashToken("a") + "\noperator " + HashToken("a"), "line 2: the same token hash is already on line 1"},
	} {
		_, err := ParseTokens("tokens.txt", []byte(c.text))
		if !errors.Is(err, ErrBadTokenFile) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tokens.txt") {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
	_, err = LoadTokens(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, ErrBadTokenFile) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestTokensNeverLogged: requests are logged with the role and the
// token's label, never the token or its hash.
func TestTokensNeverLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok(http.StatusOK, "GET", "/v1/workspaces", userToken, nil, nil)
	e.do("GET", "/v1/workspaces", userToken+"wrong", nil)
	e.ok(http.StatusOK, "GET", "/v1/repair-holds", operatorToken, nil, nil)
	logs := e.logs.String()
	if !strings.Contains(logs, `"who":"inbox"`) || !strings.Contains(logs, `"who":"ops-alice"`) || !strings.Contains(logs, `"status":401`) {
		t.Fatalf("requests not logged: %s", logs)
	}
	for _, secret := range []string{userToken, operatorToken, HashToken(userToken)[7:], "Bearer"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log holds %q: %s", secret, logs)
		}
	}
}
