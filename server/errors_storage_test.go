package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"lifeboat/backend"
	"lifeboat/recovery"
)

// TestStorageUnavailable: a repository storage outage is answered 503
// storage_unavailable, and a client's answer with that code is
// backend.ErrUnavailable again (the CLI exits with 23).
func TestStorageUnavailable(t *testing.T) {
	ae := toAPIError(fmt.Errorf("capture: saving data/ab: %w", backend.ErrUnavailable))
	if ae.Status != http.StatusServiceUnavailable || ae.Code != "storage_unavailable" {
		t.Fatalf("storage outage answered %d %s", ae.Status, ae.Code)
	}
	if !errors.Is(&APIError{Status: ae.Status, Code: ae.Code}, backend.ErrUnavailable) {
		t.Fatal("a storage_unavailable answer is not backend.ErrUnavailable")
	}
}

// TestStateUnavailable: a shared state database that cannot be reached is
// answered 503 state_unavailable, and a client's answer with that code is
// recovery.ErrStateUnavailable again (the CLI exits with 24).
func TestStateUnavailable(t *testing.T) {
	ae := toAPIError(fmt.Errorf("workspace bot1: %w", recovery.ErrStateUnavailable))
	if ae.Status != http.StatusServiceUnavailable || ae.Code != "state_unavailable" {
		t.Fatalf("state database outage answered %d %s", ae.Status, ae.Code)
	}
	if !errors.Is(&APIError{Status: ae.Status, Code: ae.Code}, recovery.ErrStateUnavailable) {
		t.Fatal("a state_unavailable answer is not recovery.ErrStateUnavailable")
	}
}
