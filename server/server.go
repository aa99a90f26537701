package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Config sets up a Server. Recovery and Tokens are required.
type Config struct {
	// Recovery is the one seam to package recovery: the lifecycle's
	// workspaces and captures, and the recovery state machine.
	Recovery RecoveryService
	Tokens   *Tokens
	// Events is the hub the lifecycle's receipts go to as well
	// (recovery.Config.OnReceipt = Events.Receipt); default a new one.
	Events *Events
	Logger *slog.Logger
	// Heartbeat is how often an idle event stream gets a comment line, so
	// proxies keep it open; default 15 s.
	Heartbeat time.Duration
	// Policies stores workspaces' retention policies (POST and PATCH
	// /v1/workspaces with a policy); nil refuses them.
	Policies PolicySetter
	// Maintenance runs forget and prune now (POST /v1/prune); nil: 503.
	Maintenance Maintainer
	// Metrics serves GET /metrics; nil: 404.
	Metrics *Metrics
	// Timeouts bound slow and idle connections (HTTPServer); a zero field
	// is its DefaultTimeouts value.
	Timeouts Timeouts
}

// Maintainer runs the repository's maintenance (forget by policy, then
// prune) and returns its report.
type Maintainer interface {
	Maintain(ctx context.Context) (any, error)
}

// Server is the HTTP API. Make one with New, serve Handler, and Close it.
type Server struct {
	rec    RecoveryService
	api    recoveryView // rec's recovery state machine, in the API's words
	tokens *Tokens
	events *Events
	log    *slog.Logger
	beat   time.Duration

	timeouts Timeouts

	policies PolicySetter
	maint    Maintainer
	metricsH *Metrics
	mux      *http.ServeMux
	routes   []Route

	stopPump func()
	pumpDone chan struct{}
	closing  sync.Once
}

// Route is one registered API route.
type Route struct {
	Method, Path string
	Role         Role // the least role allowed; RoleNone: no token needed
	handle       func(w http.ResponseWriter, r *http.Request) error
}

// New makes a Server and starts relaying the recovery service's events.
func New(cfg Config) (*Server, error) {
	if cfg.Recovery == nil || cfg.Tokens == nil {
		return nil, errors.New("server: a RecoveryService and Tokens are required")
	}
	s := &Server{rec: cfg.Recovery, api: recoveryView{cfg.Recovery}, tokens: cfg.Tokens, events: cfg.Events, log: cfg.Logger,
		beat: cfg.Heartbeat, mux: http.NewServeMux(), pumpDone: make(chan struct{}),
		policies: cfg.Policies, maint: cfg.Maintenance, metricsH: cfg.Metrics, timeouts: cfg.Timeouts.orDefault()}
	if s.events == nil {
		s.events = NewEvents()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.beat <= 0 {
		s.beat = 15 * time.Second
	}
	s.register()
	ch, cancel := s.api.Subscribe()
	s.stopPump = cancel
	go s.pump(ch)
	return s, nil
}

// pump relays the recovery service's events to every stream.
func (s *Server) pump(ch <-chan Event) {
	defer close(s.pumpDone)
	for ev := range ch {
		s.events.Publish(ev.Type, ev.Workspace, ev.Data)
	}
}

// Close stops relaying events and ends every event stream (so that
// http.Server.Shutdown does not wait for them).
func (s *Server) Close() {
	s.closing.Do(func() {
		s.stopPump()
		<-s.pumpDone
		s.events.Close()
	})
}

// Events is the server's event hub.
func (s *Server) Events() *Events { return s.events }

// Routes lists every registered API route.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// Handler serves the API, the event stream and the status page.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) route(method, path string, role Role, h func(w http.ResponseWriter, r *http.Request) error) {
	rt := Route{Method: method, Path: path, Role: role, handle: h}
	s.routes = append(s.routes, rt)
	s.mux.Handle(method+" "+path, s.wrap(rt))
}

type ctxKey struct{}

// caller is who sent the request.
type caller struct {
	role  Role
	label string
	note  *auditNote
}

func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(ctxKey{}).(caller)
	return c
}

// wrap sets the answer's common headers and the request's deadlines,
// checks the token and role, runs the handler, answers its error and logs
// the request (never its headers), and a state-changing one again as an
// audit line.
func (s *Server) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		rc := http.NewResponseController(w)
		body := readDeadline(rc, r, s.timeouts.Read)
		rw := &statusWriter{ResponseWriter: w, start: func() { s.extendWrite(rc) }}
		role, label := s.tokens.match(r)
		note := &auditNote{workspace: r.PathValue("ws")}
		err := authorize(rt.Role, role)
		if err == nil {
			r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, caller{role, label, note}))
			r.Body = body // on the handler's copy: net/http keeps its own
			err = rt.handle(rw, r)
		}
		code := ""
		if err != nil {
			ae := toAPIError(err)
			code = ae.Code
			if rw.status != 0 {
				s.log.Warn("error after the answer started", "path", r.URL.Path, "error", err)
			} else {
				writeError(rw, err)
			}
		}
		s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rw.status, "role", role.String(), "who", label,
			"duration", time.Since(start))
		if stateChanging(r.Method) {
			s.log.Info("audit", "role", role.String(), "who", label, "method", r.Method, "path", r.URL.Path,
				"workspace", note.workspace, "idempotency_key", auditKey(r), "status", rw.status, "code", code)
		}
	})
}

func authorize(need, have Role) error {
	switch {
	case need == RoleNone || have >= need:
		return nil
	case have == RoleNone:
		return &apiError{http.StatusUnauthorized, "unauthorized", "no valid bearer token: send `Authorization: Bearer <token>` with a token listed in the server's token file"}
	}
	return &apiError{http.StatusForbidden, "forbidden", "this action needs an operator token; a " + have.String() + " token may not do it"}
}

// statusWriter remembers the status and calls start when the answer
// starts (its write deadline); it passes Flush through for the event
// stream.
type statusWriter struct {
	http.ResponseWriter
	status int
	start  func()
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.start()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.start()
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
