package server

import (
	"net/http"
	"strings"
)

// auditNote is what a handler adds to its request's audit line: the
// workspace when the path does not name it (a registration names it in
// its body).
type auditNote struct{ workspace string }

// noteWorkspace records the workspace a request acts on for its audit line.
func noteWorkspace(r *http.Request, ws string) {
	if n := callerOf(r).note; n != nil {
		n.workspace = ws
	}
}

// stateChanging reports whether a request of this method changes state:
// these get an audit line.
func stateChanging(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// auditKey is the request's Idempotency-Key as the audit line shows it:
// at most 128 bytes (the longest key the server accepts), "" when absent.
func auditKey(r *http.Request) string {
	k := r.Header.Get("Idempotency-Key")
	if len(k) > 128 {
		k = k[:128] + "..."
	}
	return strings.ToValidUTF8(k, "?")
}
