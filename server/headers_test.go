package server

import (
	"net/http"
	"testing"
)

// TestSecurityHeadersEverywhere: every answer, JSON or error, with or
// without a token, the status page and its assets, metrics and the event
// stream, carries X-Content-Type-Options: nosniff and Referrer-Policy:
// no-referrer (the page's URL may hold the token in its fragment).
func TestSecurityHeadersEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		method, path, tok string
		status            int
	}{
		{"GET", "/v1/workspaces", userToken, http.StatusOK},
		{"GET", "/v1/workspaces", "", http.StatusUnauthorized},
		{"GET", "/v1/repair-holds", userToken, http.StatusForbidden},
		{"GET", "/v1/workspaces/nope", userToken, http.StatusNotFound},
		{"POST", "/v1/workspaces", userToken, http.StatusBadRequest},
		{"GET", "/v1/nothing", userToken, http.StatusNotFound},
		{"PUT", "/v1/workspaces", userToken, http.StatusMethodNotAllowed},
		{"GET", "/metrics", userToken, http.StatusNotFound},
		{"GET", "/", "", http.StatusOK},
		{"GET", "/static/app.js", "", http.StatusOK},
		{"GET", "/static/style.css", "", http.StatusOK},
	} {
		code, _, h := e.do(tc.method, tc.path, tc.tok, nil)
		if code != tc.status || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s %s: %d, nosniff %q, referrer policy %q", tc.method, tc.path, code,
				h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
	}
	s := e.stream(userToken, "")
	if h := s.res.Header; h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("event stream: %v", h)
	}
}
