package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"lifeboat/backend"
	"lifeboat/providers"
	"lifeboat/recovery"
)

// apiError is the body of every error answer.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(msg string) *apiError {
	return &apiError{http.StatusBadRequest, "bad_request", msg}
}

// errorCodes maps the errors of the lifecycle and the recovery service
// (recovery's own sentinels: the server has none of its own for them) to a
// status and a stable code; the first match wins.
var errorCodes = []struct {
	err    error
	status int
	code   string
}{
	{recovery.ErrUnknownWorkspace, http.StatusNotFound, "unknown_workspace"},
	{recovery.ErrBadWorkspaceID, http.StatusBadRequest, "bad_workspace_id"},
	{recovery.ErrUnknownOperation, http.StatusNotFound, "not_found"},
	{recovery.ErrUnknownHold, http.StatusNotFound, "not_found"},
	{recovery.ErrUnknownProcess, http.StatusNotFound, "not_found"},
	{recovery.ErrRecovering, http.StatusConflict, "recovering"},
	// No checkpoint to offer is "not lost" for the API: nothing is offered.
	{recovery.ErrNotLost, http.StatusConflict, "not_lost"},
	{recovery.ErrNoCheckpoint, http.StatusConflict, "not_lost"},
	{recovery.ErrStaleOffer, http.StatusConflict, "checkpoint_mismatch"},
	{recovery.ErrStaleGeneration, http.StatusConflict, "stale_generation"},
	{recovery.ErrKeyReused, http.StatusUnprocessableEntity, "idempotency_key_reused"},
	{recovery.ErrHoldResolved, http.StatusConflict, "hold_resolved"},
	{recovery.ErrNoNativeCheckpoint, http.StatusConflict, "no_native_checkpoint"},
	{recovery.ErrWorkspaceExists, http.StatusConflict, "workspace_exists"},
	{recovery.ErrInvalidChange, http.StatusBadRequest, "bad_request"},
	{recovery.ErrUnknownProvider, http.StatusBadRequest, "unknown_provider"},
	{recovery.ErrInstanceMissing, http.StatusUnprocessableEntity, "instance_missing"},
	{recovery.ErrNotRestartable, http.StatusConflict, "not_restartable"},
	{recovery.ErrLost, http.StatusConflict, "lost"},
	{providers.ErrUnavailable, http.StatusServiceUnavailable, "provider_unavailable"},
	{backend.ErrUnavailable, http.StatusServiceUnavailable, "storage_unavailable"},
	{recovery.ErrStateUnavailable, http.StatusServiceUnavailable, "state_unavailable"},
	{providers.ErrUnauthorized, http.StatusBadGateway, "provider_auth_failed"},
	{providers.ErrRateLimited, http.StatusTooManyRequests, "provider_rate_limited"},
	{providers.ErrInvalid, http.StatusBadRequest, "provider_invalid"},
	{providers.ErrConflict, http.StatusConflict, "provider_conflict"},
	{providers.ErrUnsupported, http.StatusConflict, "provider_unsupported"},
	{context.Canceled, http.StatusServiceUnavailable, "cancelled"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "cancelled"},
}

// toAPIError gives err its status and code. The message is the error's
// own text: errors in Lifeboat name the object and what to do, and never
// carry a secret.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return &apiError{c.status, c.code, err.Error()}
		}
	}
	return &apiError{http.StatusInternalServerError, "internal", err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// reply writes v with status, or returns err for the error writer: the
// tail of a handler whose last call yields its answer.
func reply(w http.ResponseWriter, status int, v any, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, status, v)
	return nil
}

// replyList is reply for a list, written as [] rather than null when it
// is empty.
func replyList[T any](w http.ResponseWriter, xs []T, err error) error {
	if xs == nil {
		xs = []T{}
	}
	return reply(w, http.StatusOK, xs, err)
}

func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lifeboat"`)
	}
	if d, ok := providers.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(d.Seconds(), 1))))
	}
	writeJSON(w, ae.Status, ae)
}
