package recovery

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/repo"
)

// wrapProv is the local provider with test hooks on some methods. It
// embeds *local.Provider, so Root is promoted and the service treats it as
// local (staging trees readable here).
type wrapProv struct {
	*local.Provider
	mu         sync.Mutex
	creates    int
	execs      int
	inspect    func(id providers.InstanceID) (providers.Status, error, bool) // handled when the bool is true
	writeFiles func(id providers.InstanceID, src string) (string, error, bool)
	writeCtx   func(ctx context.Context, id providers.InstanceID) (string, error, bool) // like writeFiles, with the call's context
	support    *providers.FileSupport                                                   // what FileSupport answers instead of the local provider's
}

func (w *wrapProv) FileSupport(ctx context.Context) (providers.FileSupport, error) {
	if w.support != nil {
		return *w.support, nil
	}
	return w.Provider.FileSupport(ctx)
}

func (w *wrapProv) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	if w.inspect != nil {
		if st, err, ok := w.inspect(id); ok {
			return st, err
		}
	}
	return w.Provider.Inspect(ctx, id)
}

func (w *wrapProv) Create(ctx context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	w.mu.Lock()
	w.creates++
	w.mu.Unlock()
	return w.Provider.Create(ctx, spec)
}

func (w *wrapProv) WriteFiles(ctx context.Context, id providers.InstanceID, src string) (string, error) {
	if w.writeFiles != nil {
		if st, err, ok := w.writeFiles(id, src); ok {
			return st, err
		}
	}
	if w.writeCtx != nil {
		if st, err, ok := w.writeCtx(ctx, id); ok {
			return st, err
		}
	}
	return w.Provider.WriteFiles(ctx, id, src)
}

func (w *wrapProv) Exec(ctx context.Context, id providers.InstanceID, argv []string, stdin io.Reader) (providers.ExecResult, error) {
	w.mu.Lock()
	w.execs++
	w.mu.Unlock()
	return w.Provider.Exec(ctx, id, argv, stdin)
}

func (w *wrapProv) count() (creates, execs int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.creates, w.execs
}

// stepPoints are the points of an operation's steps after the approved
// one, in order, where the service's step hook (serviceHooks.step) is
// called: a test stops or kills the operation at each in turn.
var stepPoints = []string{"before:creating", "after:creating", "before:restoring", "after:restoring",
	"before:validating", "before:switching", "after:switching"}

// renv is a lifecycle and a recovery service over the local provider, a
// real repository and a fake clock, that can be closed and reopened on the
// same state directory as a restarted server would.
type renv struct {
	t        *testing.T
	ctx      context.Context
	clock    *fakeClock
	p        *wrapProv
	r        *repo.Repository
	repoDir  string
	stateDir string
	store    *Store
	lc       *Lifecycle
	svc      *Service
	restorer Restorer
	capturer Capturer // default a RepoCapturer over r
	redact   Redactor // the lifecycle's redaction rules
	hooks    serviceHooks
}

func newREnv(t *testing.T, files map[string]string) *renv {
	t.Helper()
	e := &renv{t: t, ctx: context.Background(), clock: newFakeClock(), p: &wrapProv{Provider: local.New(t.TempDir())},
		stateDir: t.TempDir()}
	e.r, e.repoDir = newTestRepoDir(t)
	e.restorer = &RepoRestorer{Repo: e.r}
	e.capturer = &RepoCapturer{Repo: e.r}
	writeFiles(t, e.dir("bot1"), files)
	e.open()
	if err := e.store.AddWorkspace(Workspace{ID: "bot1", Provider: local.Name, Instance: "bot1", Created: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

// newLostREnv is newREnv with botFiles whose workspace was captured and
// then lost (the service detected it); cp is the capture, the checkpoint
// to recover.
func newLostREnv(t *testing.T) (e *renv, cp Receipt) {
	t.Helper()
	e = newREnv(t, botFiles)
	cp = e.capture()
	e.lose()
	return e, cp
}

func (e *renv) dir(id providers.InstanceID) string { return filepath.Join(e.p.Root(), string(id)) }

func (e *renv) open() {
	e.t.Helper()
	var err error
	if e.store, err = openTestStore(e.t, e.stateDir); err != nil {
		e.t.Fatal(err)
	}
	e.lc, err = New(Config{Store: e.store, Capturer: e.capturer, Providers: []providers.Provider{e.p}, Clock: e.clock,
		Holds: &RepoHolds{Repo: e.r, Now: e.clock.Now}, Redact: e.redact})
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc, err = NewService(ServiceConfig{Lifecycle: e.lc, Restorer: e.restorer, StateDir: e.stateDir})
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc.hooks = e.hooks
}

func (e *renv) close() {
	if e.svc == nil {
		return
	}
	e.svc.Close()
	e.lc.Close()
	_ = e.store.Close()
	e.svc = nil
}

// reopen is a server restart: everything closed, the store reopened and
// unfinished operations resumed.
func (e *renv) reopen() {
	e.close()
	e.open()
	e.svc.Resume(e.ctx)
}

func (e *renv) capture() Receipt {
	e.t.Helper()
	r := e.lc.Capture(e.ctx, "bot1", ReasonManual)
	if r.Outcome != Captured {
		e.t.Fatalf("capture: %+v", r)
	}
	return r
}

// lose destroys the test sandbox and has the service detect it.
func (e *renv) lose() {
	e.t.Helper()
	if err := e.p.Destroy(e.ctx, "bot1"); err != nil {
		e.t.Fatal(err)
	}
	h, err := e.svc.Check(e.ctx, "bot1")
	if err != nil || h.State != HealthLost {
		e.t.Fatalf("check after destroy: %+v %v", h, err)
	}
}

// approve approves bot1's recovery from checkpoint with the idempotency
// key; an error fails the test.
func (e *renv) approve(checkpoint, key string) Operation {
	e.t.Helper()
	op, err := e.svc.Approve(e.ctx, "bot1", checkpoint, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

// refuseCopyBack has every copy-back fail before it writes, with the
// local provider's error of kind wrapping err; *calls counts them.
func (e *renv) refuseCopyBack(kind providers.Kind, err error) (calls *int) {
	calls = new(int)
	e.p.writeFiles = func(id providers.InstanceID, src string) (string, error, bool) {
		*calls++
		return "", &providers.Error{Provider: "local", Op: "write files", Instance: id, Kind: kind, Err: err}, true
	}
	return calls
}

func (e *renv) wait(id string) Operation {
	e.t.Helper()
	op, err := e.svc.Wait(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

// instances lists the instance directories under the provider's root.
func (e *renv) instances() []string {
	e.t.Helper()
	ents, err := os.ReadDir(e.p.Root())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ents {
		if d.Name() != ".lifeboat" {
			out = append(out, d.Name())
		}
	}
	return out
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
