package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"lifeboat/recovery"
)

// forWorkspace is the handler of a GET that answers with what get returns
// for the request's workspace.
func forWorkspace[T any](s *Server, get func(ctx context.Context, ws string) (T, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		ws, err := s.workspace(r)
		if err != nil {
			return err
		}
		v, err := get(r.Context(), ws.ID)
		return reply(w, http.StatusOK, v, err)
	}
}

// idempotencyKey returns the request's Idempotency-Key header: required,
// 1 to 128 printable ASCII characters.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if k == "" {
		return "", &apiError{http.StatusBadRequest, "idempotency_key_required",
			"this action needs an Idempotency-Key header (a new random value per action, the same one when retrying it)"}
	}
	if len(k) > 128 || strings.IndexFunc(k, func(c rune) bool { return c < 0x21 || c > 0x7e }) >= 0 {
		return "", &apiError{http.StatusBadRequest, "bad_idempotency_key", "the Idempotency-Key header must be 1 to 128 printable ASCII characters without spaces"}
	}
	return k, nil
}

// keyedWorkspace returns the request's workspace and its Idempotency-Key
// (checked in that order), for the actions done once per key.
func (s *Server) keyedWorkspace(r *http.Request) (recovery.Workspace, string, error) {
	ws, err := s.workspace(r)
	if err != nil {
		return recovery.Workspace{}, "", err
	}
	key, err := idempotencyKey(r)
	return ws, key, err
}

// maxBody bounds a JSON request body.
const maxBody = 64 << 10

// decode reads a JSON body into v: exactly one JSON value, at most
// maxBody bytes, with nothing but white space after it; unknown fields
// are refused.
func decode(r *http.Request, v any) error {
	body := &io.LimitedReader{R: r.Body, N: maxBody + 1}
	d := json.NewDecoder(body)
	d.DisallowUnknownFields()
	err := d.Decode(v)
	trailing := false
	if err == nil {
		var terr error
		if _, terr = d.Token(); terr != io.EOF {
			trailing, err = true, terr
		}
	}
	var ae *apiError
	switch {
	case errors.As(err, &ae): // the body did not arrive in time
		return ae
	case body.N <= 0:
		return badRequest(fmt.Sprintf("the request body is larger than %d KiB", maxBody>>10))
	case trailing:
		return badRequest("the request body has more after its JSON object: send exactly one JSON object")
	case err != nil:
		return badRequest(fmt.Sprintf("the request body is not the expected JSON object: %v", err))
	}
	return nil
}

type approveRequest struct {
	Checkpoint string `json:"checkpoint"`
}

// approve starts the recovery of ws from the checkpoint the user saw, or
// returns the operation already started with the same key.
func (s *Server) approve(w http.ResponseWriter, r *http.Request) error {
	ws, key, err := s.keyedWorkspace(r)
	if err != nil {
		return err
	}
	var req approveRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Checkpoint == "" {
		return badRequest("the approval must name the checkpoint shown in the offer: {\"checkpoint\": \"<id>\"}")
	}
	op, err := s.api.Approve(r.Context(), ws.ID, req.Checkpoint, key)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/operations/"+op.ID)
	writeJSON(w, http.StatusAccepted, op)
	return nil
}

func (s *Server) operation(w http.ResponseWriter, r *http.Request) error {
	op, err := s.api.Operation(r.Context(), r.PathValue("id"))
	return reply(w, http.StatusOK, op, err)
}

// processes lists the workspace's lost processes (the default, or
// ?state=lost), or the processes registered now (?state=registered).
func (s *Server) processes(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	switch q := r.URL.Query().Get("state"); q {
	case "", "lost":
	case "registered":
		ps, err := s.rec.Processes(ws.ID)
		return reply(w, http.StatusOK, ps, err)
	default:
		return badRequest(fmt.Sprintf("state=%q: want lost (the default) or registered", q))
	}
	ps, err := s.api.LostProcesses(r.Context(), ws.ID)
	return replyList(w, ps, err)
}

func (s *Server) restartProcess(w http.ResponseWriter, r *http.Request) error {
	ws, key, err := s.keyedWorkspace(r)
	if err != nil {
		return err
	}
	pr, err := s.api.RestartProcess(r.Context(), ws.ID, r.PathValue("proc"), key)
	return reply(w, http.StatusAccepted, pr, err)
}

// repairHolds lists the open repair holds (the default, ?state=open), the
// resolved ones (?state=resolved) or all (?state=all).
func (s *Server) repairHolds(w http.ResponseWriter, r *http.Request) error {
	var hs []RepairHold
	var err error
	state := r.URL.Query().Get("state")
	switch state {
	case "", "open":
		hs, err = s.api.RepairHolds(r.Context())
	case "resolved", "all":
		hs, err = s.api.AllRepairHolds(r.Context())
		if state == "resolved" {
			hs = slices.DeleteFunc(hs, func(h RepairHold) bool { return h.Resolution == nil })
		}
	default:
		return badRequest(fmt.Sprintf("state=%q: want open (the default), resolved or all", state))
	}
	return replyList(w, hs, err)
}

func (s *Server) repairHold(w http.ResponseWriter, r *http.Request) error {
	h, err := s.api.RepairHold(r.Context(), r.PathValue("id"))
	return reply(w, http.StatusOK, h, err)
}

// stopRepairHold stops the allocation a hold keeps (again, after a stop
// that failed).
func (s *Server) stopRepairHold(w http.ResponseWriter, r *http.Request) error {
	h, err := s.api.StopRepairHold(r.Context(), r.PathValue("id"))
	return reply(w, http.StatusOK, h, err)
}

// operations lists the recovery operations (?workspace=ID for one).
func (s *Server) operations(w http.ResponseWriter, r *http.Request) error {
	ws := r.URL.Query().Get("workspace")
	if ws != "" {
		if err := recovery.ValidWorkspaceID(ws); err != nil {
			return err
		}
	}
	ops, err := s.api.Operations(r.Context(), ws)
	return replyList(w, ops, err)
}

type resolveRequest struct {
	Outcome  string `json:"outcome"`
	Evidence string `json:"evidence"`
}

// resolveHold records an operator's resolution; the operator is the
// token's label.
func (s *Server) resolveHold(w http.ResponseWriter, r *http.Request) error {
	var req resolveRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Outcome) == "" || strings.TrimSpace(req.Evidence) == "" {
		return badRequest("a resolution needs an outcome and the evidence the operator checked: {\"outcome\": \"...\", \"evidence\": \"...\"}")
	}
	h, err := s.api.ResolveHold(r.Context(), r.PathValue("id"),
		Resolution{Outcome: req.Outcome, Evidence: req.Evidence, Operator: callerOf(r).label, Time: time.Now().UTC()})
	if errors.Is(err, recovery.ErrUnknownHold) {
		return &apiError{http.StatusNotFound, "not_found", fmt.Sprintf("no repair hold %q: %v", r.PathValue("id"), err)}
	}
	return reply(w, http.StatusOK, h, err)
}
