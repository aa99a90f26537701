package e2b

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/e2b/e2btest"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// The contract server (e2btest) is built from E2B's public references:
// spec/openapi.yml, spec/envd/envd.yaml and spec/envd/process/process.proto
// of github.com/e2b-dev/E2B.

func start(t *testing.T) (*e2btest.Server, Config) {
	srv := e2btest.Start(t, "key")
	return srv, Config{APIKey: "key", BaseURL: srv.URL, SandboxURL: srv.URL, CacheDir: filepath.Join(t.TempDir(), "cache")}
}

func mustNew(t *testing.T, cfg Config) *Provider {
	t.Helper()
	return providertest.MustNew(t, New, cfg)
}

// startWithSandbox starts the contract server and a provider on it, and
// creates one sandbox.
func startWithSandbox(t *testing.T) (*e2btest.Server, *Provider, providers.InstanceID) {
	t.Helper()
	srv, cfg := start(t)
	p := mustNew(t, cfg)
	return srv, p, providertest.MustCreate(t, p, "k")
}

func TestConformance(t *testing.T) {
	srv, cfg := start(t)
	providertest.Run(t, providertest.Harness{
		New:              func(t *testing.T) providers.Provider { return mustNew(t, cfg) },
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) { srv.Remove(string(id)) },
		Unreachable: func(t *testing.T) providers.Provider {
			down := httptest.NewServer(http.NotFoundHandler())
			down.Close()
			c := cfg
			c.BaseURL, c.SandboxURL = down.URL, down.URL
			return mustNew(t, c)
		},
		Absent: "sb-absent",
	})
}

// answer makes srv answer every request with status and body.
func answer(srv *e2btest.Server, match func(*http.Request) bool, status int, body, retryAfter string) {
	srv.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if match != nil && !match(r) {
			return false
		}
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		http.Error(w, body, status)
		return true
	})
}

// statusCase is one answer of the platform and the kind (and, for a rate
// limit, the wait) an adapter must make of it.
type statusCase struct {
	status     int
	body       string
	retryAfter string
	want       providers.Kind
	wantWait   time.Duration
}

// wantStatus fails t unless err, what's answer to c, is of c's kind with
// c's wait.
func wantStatus(t *testing.T, what string, err error, c statusCase) {
	t.Helper()
	providertest.WantKind(t, fmt.Sprintf("%s answered %d", what, c.status), err, c.want)
	if d, _ := providers.RetryAfter(err); d != c.wantWait {
		t.Fatalf("%s %d: RetryAfter %v, want %v", what, c.status, d, c.wantWait)
	}
}

var statusCases = []statusCase{
	{401, `{"code":401,"message":"Invalid API key"}`, "", providers.KindUnauthorized, 0},
	{403, `{"code":403,"message":"forbidden"}`, "", providers.KindUnauthorized, 0},
	{404, `{"code":404,"message":"not found"}`, "", providers.KindConflict, 0},
	{409, `{"message":"The sandbox is paused","code":409,"canAutoResume":false}`, "", providers.KindConflict, 0},
	{410, `{}`, "", providers.KindConflict, 0},
	{429, `{"code":429,"message":"rate limit"}`, "7", providers.KindRateLimited, 7 * time.Second},
	{429, `{}`, "", providers.KindRateLimited, 0},
	{500, `{}`, "", providers.KindUnavailable, 0},
	{502, `{"sandboxId":"x","message":"The sandbox was not found","code":502}`, "", providers.KindUnavailable, 0},
	{503, `{}`, "", providers.KindUnavailable, 0},
	{507, `{"code":507,"message":"not enough disk space"}`, "", providers.KindUnavailable, 0},
	{400, `{"code":400,"message":"bad"}`, "", providers.KindInvalid, 0},
}

// TestStatusMapping: every control-plane answer maps to its kind, 404
// only ever to Missing from Inspect, Retry-After honoured.
func TestStatusMapping(t *testing.T) {
	srv, p, id := startWithSandbox(t)
	ctx := context.Background()
	for _, c := range statusCases {
		answer(srv, nil, c.status, c.body, c.retryAfter)
		st, err := p.Inspect(ctx, id)
		if c.status == 404 {
			if err != nil || st.State != providers.Missing {
				t.Fatalf("Inspect answered 404: %+v, %v; want Missing", st, err)
			}
		} else {
			if st.State == providers.Missing {
				t.Fatalf("%d answered as Missing", c.status)
			}
			wantStatus(t, "Inspect", err, c)
		}
		_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "other"})
		providertest.WantKind(t, fmt.Sprintf("Create answered %d", c.status), err, c.want)
	}
	srv.SetFault(nil)
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("after the faults: %+v, %v", st, err)
	}
}

// TestDataPlaneStatusMapping: envd's answers (through the edge) map to
// the same kinds for Exec, ReadFiles and WriteFiles; none is Missing, and
// Inspect still finds the sandbox running.
func TestDataPlaneStatusMapping(t *testing.T) {
	srv, p, id := startWithSandbox(t)
	ctx := context.Background()
	src := t.TempDir()
	providertest.Tree(t, src, "d")
	envdOnly := func(r *http.Request) bool { return r.Header.Get("E2b-Sandbox-Id") != "" }
	for _, c := range statusCases {
		answer(srv, envdOnly, c.status, c.body, c.retryAfter)
		_, err := p.Exec(ctx, id, []string{"true"}, nil)
		wantStatus(t, "Exec", err, c)
		_, err = p.ReadFiles(ctx, id)
		providertest.WantKind(t, fmt.Sprintf("ReadFiles answered %d", c.status), err, c.want)
		_, err = p.WriteFiles(ctx, id, src)
		providertest.WantKind(t, fmt.Sprintf("WriteFiles answered %d", c.status), err, c.want)
		if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
			t.Fatalf("envd answering %d: Inspect = %+v, %v", c.status, st, err)
		}
	}
	srv.SetFault(nil)
	// A wrong envd access token is the sandbox refusing us.
	sb, _ := srv.Lookup(string(id))
	srv.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("E2b-Sandbox-Id") != "" && r.Header.Get("X-Access-Token") != sb.Token {
			t.Errorf("envd request without the sandbox's access token")
		}
		return false
	})
	if res, err := p.Exec(ctx, id, []string{"sh", "-c", "echo $HOME"}, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec after the faults: %+v, %v", res, err)
	}
}

func TestPausedAndTimeout(t *testing.T) {
	srv, cfg := start(t)
	p := mustNew(t, cfg)
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	srv.SetState(string(id), "paused")
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Stopped {
		t.Fatalf("paused sandbox: %+v, %v", st, err)
	}
	_, err := p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles of a paused sandbox", err, providers.KindConflict)
	srv.SetState(string(id), "running")
	// A control plane that does not answer before the deadline.
	release := make(chan struct{})
	srv.SetFault(platformtest.Hang(release))
	defer close(release)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = p.Inspect(tctx, id)
	providertest.WantKind(t, "Inspect timing out", err, providers.KindUnavailable)
	srv.SetFault(nil)
	bad := cfg
	bad.APIKey = "wrong"
	_, err = mustNew(t, bad).Inspect(ctx, id)
	providertest.WantKind(t, "Inspect with a wrong key", err, providers.KindUnauthorized)
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error carries the API key: %v", err)
	}
}

// TestPauseResume: Pause and Resume drive the sandbox's state through the
// control plane; repeating either is not an error; a missing sandbox is a
// conflict, never Missing.
func TestPauseResume(t *testing.T) {
	srv, p, id := startWithSandbox(t)
	ctx := context.Background()
	for i := range 2 {
		if err := p.Pause(ctx, id); err != nil {
			t.Fatalf("Pause #%d: %v", i+1, err)
		}
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Stopped {
		t.Fatalf("after Pause: %+v, %v", st, err)
	}
	for i := range 2 {
		if err := p.Resume(ctx, id); err != nil {
			t.Fatalf("Resume #%d: %v", i+1, err)
		}
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("after Resume: %+v, %v", st, err)
	}
	srv.Remove(string(id))
	providertest.WantKind(t, "Pause of a removed sandbox", p.Pause(ctx, id), providers.KindConflict)
	answer(srv, nil, 429, `{}`, "3")
	err := p.Resume(ctx, id)
	providertest.WantKind(t, "Resume rate limited", err, providers.KindRateLimited)
	if d, _ := providers.RetryAfter(err); d != 3*time.Second {
		t.Fatalf("Resume RetryAfter %v", d)
	}
}

// TestCreateWaitsForEnvd: E2B answers POST /sandboxes before its edge
// routes to the sandbox, meanwhile answering envd with the 502 "sandbox
// was not found" (a third-party report of this gap, and E2B's own edge
// template for that answer). Create keeps trying to make the workspace
// until envd answers, and never reports the sandbox missing; an envd that
// refuses the access token fails Create at once.
func TestCreateWaitsForEnvd(t *testing.T) {
	srv, cfg := start(t)
	p := mustNew(t, cfg)
	p.readyBackoff = time.Millisecond
	ctx := context.Background()
	var mu sync.Mutex
	refused := 0
	srv.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("E2b-Sandbox-Id") == "" || refused == 3 {
			return false
		}
		refused++
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, `{"sandboxId":%q,"message":"The sandbox was not found","code":502}`, r.Header.Get("E2b-Sandbox-Id"))
		return true
	})
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatalf("Create while envd was not routable yet: %v", err)
	}
	mu.Lock()
	if refused != 3 {
		t.Fatalf("envd refused %d times, want 3", refused)
	}
	mu.Unlock()
	if fi, err := os.Stat(srv.WorkspaceDir(string(id))); err != nil || !fi.IsDir() {
		t.Fatalf("no workspace in the new sandbox: %v", err)
	}

	calls := 0
	srv.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("E2b-Sandbox-Id") == "" {
			return false
		}
		mu.Lock()
		calls++
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"message":"invalid access token","code":401}`)
		return true
	})
	_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k2"})
	providertest.WantKind(t, "Create with envd refusing the token", err, providers.KindUnauthorized)
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("an unauthorized envd was asked %d times, want once", calls)
	}
}

// TestSnapshotRollback: a rollback makes a new sandbox from the snapshot
// and kills the old one; retried, it finds the same new sandbox; the
// snapshot outlives both; snapshot calls map the control plane's answers
// like every other call.
func TestSnapshotRollback(t *testing.T) {
	srv, p, id := startWithSandbox(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(srv.WorkspaceDir(string(id)), "state.txt"), []byte("v1"), 0o644))
	cp, err := p.Checkpoint(ctx, id)
	must(err)
	must(os.WriteFile(filepath.Join(srv.WorkspaceDir(string(id)), "state.txt"), []byte("v2"), 0o644))
	to, err := p.Rollback(ctx, id, cp)
	must(err)
	if to == id {
		t.Fatalf("Rollback kept sandbox %s", id)
	}
	if b, err := os.ReadFile(filepath.Join(srv.WorkspaceDir(string(to)), "state.txt")); err != nil || string(b) != "v1" {
		t.Fatalf("the new sandbox has %q, %v; want the snapshot's v1", b, err)
	}
	if _, ok := srv.Lookup(string(id)); ok {
		t.Fatalf("the old sandbox %s still runs after the rollback", id)
	}
	again, err := p.Rollback(ctx, id, cp)
	if err != nil || again != to {
		t.Fatalf("a retried Rollback = %s, %v; want %s", again, err, to)
	}
	if n := len(srv.IDs()); n != 1 {
		t.Fatalf("%d sandboxes after two rollbacks, want 1", n)
	}
	for _, c := range statusCases {
		answer(srv, nil, c.status, c.body, c.retryAfter)
		_, err := p.Checkpoint(ctx, to)
		wantStatus(t, "Checkpoint", err, c)
		if c.status != 404 {
			providertest.WantKind(t, fmt.Sprintf("DeleteCheckpoint answered %d", c.status), p.DeleteCheckpoint(ctx, cp), c.want)
		}
		_, err = p.Rollback(ctx, to, cp)
		providertest.WantKind(t, fmt.Sprintf("Rollback answered %d", c.status), err, c.want)
	}
	srv.SetFault(nil)
	if snaps := srv.Snapshots(); len(snaps) != 1 || snaps[0] != string(cp) {
		t.Fatalf("snapshots after the faults: %v", snaps)
	}
	must(p.DeleteCheckpoint(ctx, cp))
	must(p.DeleteCheckpoint(ctx, cp))
	_, err = p.Rollback(ctx, to, cp)
	providertest.WantKind(t, "Rollback to a deleted snapshot", err, providers.KindConflict)
	if st, err := p.Inspect(ctx, to); err != nil || st.State != providers.Running {
		t.Fatalf("a failed rollback touched the sandbox: %+v, %v", st, err)
	}
}
