package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"lifeboat/backend"
	"lifeboat/recovery"
)

// TestUnavailableAnswers: an outage the server cannot work around is
// answered 503 with its own code, and a client's answer with that code is
// the sentinel again (the CLI maps it to its exit code):
//   - a repository storage outage: storage_unavailable,
//     backend.ErrUnavailable (exit 23);
//   - a shared state database that cannot be reached: state_unavailable,
//     recovery.ErrStateUnavailable (exit 24).
func TestUnavailableAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string // the outage
		err      error  // as a handler returns it
		code     string
		sentinel error
		sentName string
	}{
		{"storage outage", fmt.Errorf("capture: saving data/ab: %w", backend.ErrUnavailable), "storage_unavailable", backend.ErrUnavailable, "backend.ErrUnavailable"},
		{"state database outage", fmt.Errorf("workspace bot1: %w", recovery.ErrStateUnavailable), "state_unavailable", recovery.ErrStateUnavailable, "recovery.ErrStateUnavailable"},
	} {
		t.Run(c.code, func(t *testing.T) {
			t.Parallel()
			ae := toAPIError(c.err)
			if ae.Status != http.StatusServiceUnavailable || ae.Code != c.code {
				t.Fatalf("%s answered %d %s", c.name, ae.Status, ae.Code)
			}
			if !errors.Is(&APIError{Status: ae.Status, Code: ae.Code}, c.sentinel) {
				t.Fatalf("a %s answer is not %s", c.code, c.sentName)
			}
		})
	}
}
