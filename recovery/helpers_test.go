package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/internal/clocktest"
	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/internal/treetest"
	"lifeboat/providers"
	"lifeboat/repo"
	"lifeboat/snapshot/snapshottest"
)

// fakeClock is the shared fake clock (the lifecycle takes a Clock, and
// these tests also run child processes and a shared store, which a
// testing/synctest bubble does not allow).
type fakeClock = clocktest.Fake

func newFakeClock() *fakeClock { return clocktest.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)) }

// fakeProvider keeps instances as directories under root/instances and
// native checkpoints as copies under root/checkpoints.
type fakeProvider struct {
	root string
	caps providers.Capabilities

	mu            sync.Mutex
	state         map[providers.InstanceID]providers.State
	checkpoints   map[providers.CheckpointID]bool
	next          int
	failDeletes   int // the next n DeleteCheckpoint calls fail
	failRollback  error
	deleteCalls   int
	readFilesHook func()
	inspectHook   func(providers.InstanceID)  // called by Inspect before it answers
	inspectErr    func(context.Context) error // when set, Inspect fails with what it returns
}

func newFakeProvider(t *testing.T, native bool) *fakeProvider {
	p := &fakeProvider{root: t.TempDir(), state: map[providers.InstanceID]providers.State{}, checkpoints: map[providers.CheckpointID]bool{},
		caps: providers.Capabilities{Files: true, NativeCheckpoints: native, Exec: true}}
	for _, d := range []string{"instances", "checkpoints"} {
		if err := os.Mkdir(filepath.Join(p.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *fakeProvider) dir(id providers.InstanceID) string {
	return filepath.Join(p.root, "instances", string(id))
}

// instance makes an instance with the given files.
func (p *fakeProvider) instance(t *testing.T, id providers.InstanceID, files map[string]string) {
	t.Helper()
	writeFiles(t, p.dir(id), files)
	p.mu.Lock()
	p.state[id] = providers.Running
	p.mu.Unlock()
}

func (p *fakeProvider) err(op string, id providers.InstanceID, k providers.Kind, cause error) error {
	return &providers.Error{Provider: "fake", Op: op, Instance: id, Kind: k, Err: cause}
}

func (p *fakeProvider) Name() string                         { return "fake" }
func (p *fakeProvider) Capabilities() providers.Capabilities { return p.caps }
func (p *fakeProvider) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	if p.inspectHook != nil {
		p.inspectHook(id)
	}
	if p.inspectErr != nil {
		return providers.Status{}, p.inspectErr(ctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.state[id]
	if !ok {
		st = providers.Missing
	}
	return providers.Status{State: st, Instance: id}, nil
}
func (p *fakeProvider) Create(context.Context, providers.CreateSpec) (providers.InstanceID, error) {
	return "", p.err("create", "", providers.KindUnsupported, nil)
}
func (p *fakeProvider) Destroy(context.Context, providers.InstanceID) error {
	return p.err("destroy", "", providers.KindUnsupported, nil)
}

type dirFiles string

func (d dirFiles) Dir() string  { return string(d) }
func (d dirFiles) Close() error { return nil }

func (p *fakeProvider) ReadFiles(_ context.Context, id providers.InstanceID) (providers.Files, error) {
	if p.readFilesHook != nil {
		p.readFilesHook()
	}
	if _, err := os.Stat(p.dir(id)); err != nil {
		return nil, p.err("read files", id, providers.KindUnavailable, err)
	}
	return dirFiles(p.dir(id)), nil
}
func (p *fakeProvider) WriteFiles(context.Context, providers.InstanceID, string) (string, error) {
	return "", p.err("write files", "", providers.KindUnsupported, nil)
}
func (p *fakeProvider) Switch(context.Context, providers.InstanceID, string) error {
	return p.err("switch", "", providers.KindUnsupported, nil)
}
func (p *fakeProvider) Exec(_ context.Context, id providers.InstanceID, argv []string, _ io.Reader) (providers.ExecResult, error) {
	return providers.ExecResult{ExitCode: 0, Stdout: []byte(fmt.Sprint(argv))}, nil
}

func (p *fakeProvider) Checkpoint(_ context.Context, id providers.InstanceID) (providers.CheckpointID, error) {
	p.mu.Lock()
	p.next++
	cp := providers.CheckpointID(fmt.Sprintf("cp-%d", p.next))
	p.mu.Unlock()
	if err := copyTree(p.dir(id), filepath.Join(p.root, "checkpoints", string(cp))); err != nil {
		return "", p.err("checkpoint", id, providers.KindUnavailable, err)
	}
	p.mu.Lock()
	p.checkpoints[cp] = true
	p.mu.Unlock()
	return cp, nil
}

func (p *fakeProvider) Rollback(_ context.Context, id providers.InstanceID, cp providers.CheckpointID) (providers.InstanceID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failRollback != nil {
		return "", p.err("rollback", id, providers.KindUnavailable, p.failRollback)
	}
	if !p.checkpoints[cp] {
		return "", p.err("rollback", id, providers.KindInvalid, fmt.Errorf("no checkpoint %s", cp))
	}
	p.next++
	to := providers.InstanceID(fmt.Sprintf("%s-r%d", id, p.next))
	if err := copyTree(filepath.Join(p.root, "checkpoints", string(cp)), p.dir(to)); err != nil {
		return "", p.err("rollback", id, providers.KindUnavailable, err)
	}
	delete(p.state, id)
	p.state[to] = providers.Running
	return to, nil
}

func (p *fakeProvider) DeleteCheckpoint(_ context.Context, cp providers.CheckpointID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deleteCalls++
	if p.failDeletes > 0 {
		p.failDeletes--
		return p.err("delete checkpoint", "", providers.KindUnavailable, errors.New("scripted outage"))
	}
	delete(p.checkpoints, cp)
	return os.RemoveAll(filepath.Join(p.root, "checkpoints", string(cp)))
}

func (p *fakeProvider) checkpointIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id := range p.checkpoints {
		out = append(out, string(id))
	}
	sort.Strings(out)
	return out
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}

// newTestRepo makes and opens a repository for the test.
func newTestRepo(t *testing.T) *repo.Repository {
	t.Helper()
	r, _ := newTestRepoDir(t)
	return r
}

// newTestRepoDir is newTestRepo that also returns the repository's
// directory, for a child process to open.
func newTestRepoDir(t *testing.T) (*repo.Repository, string) {
	t.Helper()
	s := storetest.Local(t)
	return repotest.New(t, repotest.Options{Store: s}), s.Location
}

// countSnapshots counts the snapshots of ws in r.
func countSnapshots(t *testing.T, r *repo.Repository, ws string) int {
	return snapshottest.Count(t, r, ws)
}

// scripted wraps a Capturer: it can fail or panic on chosen calls, and
// block until released, reporting each start.
type scripted struct {
	inner   Capturer
	mu      sync.Mutex
	calls   int
	fail    map[int]error // call number (1-based) -> error
	panicAt map[int]bool
	partial map[int]bool
	started chan int      // call number, when set
	gate    chan struct{} // when set, each call waits for a receive (or ctx)
}

func (s *scripted) Capture(ctx context.Context, req CaptureRequest) (Result, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	err, pan, part := s.fail[n], s.panicAt[n], s.partial[n]
	s.mu.Unlock()
	if s.started != nil {
		s.started <- n
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	switch {
	case pan:
		panic(fmt.Sprintf("scripted panic in call %d", n))
	case err != nil:
		return Result{}, err
	}
	if s.inner == nil {
		return Result{Snapshot: fmt.Sprintf("%064x", n), Complete: !part, Problems: map[bool]int{true: 1}[part]}, nil
	}
	res, err := s.inner.Capture(ctx, req)
	if part {
		res.Complete, res.Problems = false, 1
	}
	return res, err
}

// checksBrowsers is the inner Capturer's answer (a RepoCapturer checks).
func (s *scripted) checksBrowsers(ws string) bool {
	bc, ok := s.inner.(browserChecker)
	return ok && bc.checksBrowsers(ws)
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// recWriter records pauses and resumes.
type recWriter struct {
	mu             sync.Mutex
	pauses, resume int
	block          bool // Pause waits for ctx
	paused         chan struct{}
}

func (w *recWriter) Name() string { return "recorder" }
func (w *recWriter) Pause(ctx context.Context, _ Workspace, _ providers.Provider) error {
	w.mu.Lock()
	w.pauses++
	w.mu.Unlock()
	if w.paused != nil {
		w.paused <- struct{}{}
	}
	if w.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}
func (w *recWriter) Resume(context.Context, Workspace, providers.Provider) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resume++
	return nil
}
func (w *recWriter) counts() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pauses, w.resume
}

// env is a lifecycle over a fake provider, a fake clock and a store.
type env struct {
	t     *testing.T
	clock *fakeClock
	prov  *fakeProvider
	store *Store
	l     *Lifecycle
	r     *repo.Repository
	cap   *scripted
}

// newEnv makes workspace "ws1" (instance "i1"); withRepo captures for
// real into a repository, else the scripted capturer invents snapshots.
func newEnv(t *testing.T, native, withRepo bool, tune func(*Config)) *env {
	t.Helper()
	e := &env{t: t, clock: newFakeClock(), prov: newFakeProvider(t, native), cap: &scripted{fail: map[int]error{}, panicAt: map[int]bool{}, partial: map[int]bool{}}}
	if withRepo {
		e.r = newTestRepo(t)
		e.cap.inner = &RepoCapturer{Repo: e.r}
	}
	var err error
	if e.store, err = openTestStore(t, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.Close() })
	e.prov.instance(t, "i1", map[string]string{"a.txt": "alpha", "sub/b.txt": "bravo"})
	if err := e.store.AddWorkspace(Workspace{ID: "ws1", Provider: "fake", Instance: "i1", Created: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: e.store, Capturer: e.cap, Providers: []providers.Provider{e.prov}, Clock: e.clock}
	if tune != nil {
		tune(&cfg)
	}
	if e.l, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.l.Close)
	return e
}

func (e *env) ws(id string) Workspace {
	e.t.Helper()
	w, err := e.store.Workspace(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

func (e *env) want(r Receipt, o Outcome) {
	e.t.Helper()
	if r.Outcome != o {
		e.t.Fatalf("receipt outcome %q, want %q (error: %v)", r.Outcome, o, r.Err)
	}
}

var errFake = errors.New("scripted failure")

func mustID(t *testing.T, s string) blob.ID {
	t.Helper()
	id, err := blob.ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func writeFiles(t *testing.T, dir string, files map[string]string) { treetest.Write(t, dir, files) }
