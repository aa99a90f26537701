package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lifeboat/internal/s3test"
	"lifeboat/internal/ssetest"
	"lifeboat/recovery"
	"lifeboat/recovery/statedb/pgtest"
	"lifeboat/server"
)

// fleet is the deployment docs/deploy.md describes for many servers: one
// repository on S3-compatible storage (versitygw), one PostgreSQL state
// store, and `lifeboat serve` processes that share both and one local
// provider root, each with its own state directory, cache and config.
type fleet struct {
	t        testing.TB
	bin      string
	dir      string
	root     string // the local provider's root: one directory per instance
	loc      string // the repository location
	stateURL string
	s3       *s3test.Server
	proxy    *s3test.Proxy // between the servers and S3 when viaProxy
	pwFile   string
	tokens   string
	cliTok   string
	userTok  string
	opTok    string
	servers  []*fleetServer
	events   eventLog
}

// newFleet starts versitygw and PostgreSQL and makes the repository.
// viaProxy puts a counting proxy between the servers and S3.
func newFleet(t testing.TB, viaProxy bool) *fleet {
	t.Helper()
	dir := t.TempDir()
	f := &fleet{t: t, bin: lifeboatBinary(t), dir: dir, root: filepath.Join(dir, "root"), pwFile: filepath.Join(dir, "pw"),
		tokens: filepath.Join(dir, "tokens"), cliTok: filepath.Join(dir, "cli-token"),
		userTok: "user-token-" + filepath.Base(dir), opTok: "operator-token-" + filepath.Base(dir)}
	f.events.changed = make(chan struct{})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("events: %s", f.events.summary())
		}
		if f.proxy != nil {
			t.Logf("S3 requests: %s", f.requestSummary())
		}
	})
	f.s3 = s3test.Start(t)
	f.stateURL = pgtest.URL(t)
	bucket := f.s3.NewBucket(t)
	f.loc = f.s3.Location(bucket, "fleet")
	if viaProxy {
		f.proxy = f.s3.Proxy(t)
		f.loc = f.proxy.Location(bucket, "fleet")
	}
	f.check(os.MkdirAll(f.root, 0o755))
	f.check(os.WriteFile(f.pwFile, []byte(testPW+"\n"), 0o600))
	f.check(os.WriteFile(f.tokens, []byte("user "+server.HashToken(f.userTok)+" inbox\noperator "+server.HashToken(f.opTok)+" cli\n"), 0o600))
	f.check(os.WriteFile(f.cliTok, []byte(f.opTok+"\n"), 0o600))
	f.lifeboat("init", "--kdf-memory-kib", "64", "--kdf-time", "1")
	return f
}

func (f *fleet) check(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// env is the environment of every lifeboat process of the fleet.
func (f *fleet) env(extra ...string) []string {
	env := append(os.Environ(), f.s3.Env()...)
	env = append(env, "LIFEBOAT_STATE_URL="+f.stateURL)
	return append(env, extra...)
}

// lifeboat runs the binary on the repository (no server) and fails the
// test unless it exits 0; it returns stdout.
func (f *fleet) lifeboat(args ...string) string {
	f.t.Helper()
	return f.lifeboatEnv(nil, args...)
}

func (f *fleet) lifeboatEnv(env []string, args ...string) string {
	f.t.Helper()
	out, err := f.run(env, args...)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// run runs the binary on the repository and returns its stdout, or an
// error with its output when it did not exit 0. Safe from any goroutine.
func (f *fleet) run(env []string, args ...string) (string, error) {
	cmd := exec.Command(f.bin, append([]string{"--repo", f.loc, "--password-file", f.pwFile, "--cache-dir", filepath.Join(f.dir, "cli-cache")}, args...)...)
	cmd.Env = f.env(env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("lifeboat %v: %v\n%s%s", args, err, out, stderr.String())
	}
	return string(out), nil
}

// fleetServer is one `lifeboat serve` of a fleet.
type fleetServer struct {
	f      *fleet
	name   string
	dir    string
	cfg    string
	cmd    *exec.Cmd
	url    string
	log    *lineLog      // this run's stderr
	logs   []*lineLog    // every run's
	exited chan struct{} // closed when the process ended
}

// addServer writes a server's config ([lifecycle], [retention] and
// [prune] from extra) and starts it with env.
func (f *fleet) addServer(name, extra string, env ...string) *fleetServer {
	f.t.Helper()
	s := &fleetServer{f: f, name: name, dir: filepath.Join(f.dir, "server-"+name)}
	s.cfg = filepath.Join(s.dir, "lifeboat.toml")
	f.check(os.MkdirAll(s.dir, 0o755))
	cfg := serveConfig{repo: f.loc, passwordFile: f.pwFile, cache: filepath.Join(s.dir, "cache"), state: filepath.Join(s.dir, "state"),
		tokens: f.tokens, clientToken: f.cliTok}.head() + fmt.Sprintf(`
[providers.local]
type = "local"
root = %q
`, f.root) + extra
	f.check(os.WriteFile(s.cfg, []byte(cfg), 0o600))
	f.servers = append(f.servers, s)
	f.t.Cleanup(func() {
		if f.t.Failed() {
			// Few lines: a CI log shows its tail, and the test's own
			// failure comes before these.
			f.t.Logf("server %s, its last lines:\n%s", s.name, s.log.last(15))
		}
	})
	s.start(env...)
	return s
}

// start runs the server and waits for the address it serves on; a
// goroutine collects its capture receipts into the fleet's log.
func (s *fleetServer) start(env ...string) {
	t := s.f.t
	t.Helper()
	s.log = &lineLog{}
	s.logs = append(s.logs, s.log)
	args := []string{"--json", "--config", s.cfg}
	if dir := os.Getenv("LIFEBOAT_FLEET_CPUPROFILE"); dir != "" {
		// A CPU profile of each run of each server (the benchmark's
		// question: where a server's time goes).
		args = append(args, "--cpuprofile", filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", s.name, time.Now().UnixNano())))
	}
	s.cmd = exec.Command(s.f.bin, append(args, "serve")...)
	s.cmd.Env = s.f.env(env...)
	stdout, err := s.cmd.StdoutPipe()
	s.f.check(err)
	s.cmd.Stderr = s.log
	s.f.check(s.cmd.Start())
	cmd, exited := s.cmd, make(chan struct{})
	s.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	s.url = servingURL(t, stdout, s.log)
	go s.collectReceipts(s.url, exited)
}

// stop ends the server with SIGTERM; it must exit 0.
func (s *fleetServer) stop() {
	s.f.t.Helper()
	s.f.check(s.cmd.Process.Signal(syscall.SIGTERM))
	<-s.exited
	if !s.cmd.ProcessState.Success() {
		s.f.t.Fatalf("server %s after SIGTERM: %v\n%s", s.name, s.cmd.ProcessState, s.log)
	}
}

func (s *fleetServer) signal(sig syscall.Signal) { s.f.check(s.cmd.Process.Signal(sig)) }

func (s *fleetServer) client() *server.Client {
	return &server.Client{BaseURL: s.url, Token: s.f.opTok}
}

// rss is the server's peak resident set (VmHWM) in bytes.
func (s *fleetServer) rss() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	s.f.check(err)
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			s.f.check(err)
			return kb << 10
		}
	}
	s.f.t.Fatalf("no VmHWM for server %s", s.name)
	return 0
}

// collectReceipts reads the server's event stream until the process ends,
// reconnecting with Last-Event-ID when a stream is cut, and adds every
// capture receipt to the fleet's log.
func (s *fleetServer) collectReceipts(url string, exited chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-exited; cancel() }()
	last := ""
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, "GET", url+"/v1/events", nil)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+s.f.userTok)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			continue // the server is being stopped, or paused
		}
		rd := bufio.NewReader(res.Body)
		for {
			sse, err := ssetest.ReadEvent(rd)
			if err != nil {
				break
			}
			if sse.ID != "" {
				last = sse.ID
			}
			if sse.Type != "receipt" && sse.Type != "maintenance" {
				continue
			}
			var m struct {
				Data json.RawMessage
			}
			if err := json.Unmarshal([]byte(sse.Data), &m); err != nil {
				s.log.Write([]byte("test: undecodable event: " + err.Error() + "\n"))
				continue
			}
			ev := fleetEvent{server: s.name, typ: sse.Type, data: m.Data}
			if sse.Type == "receipt" && json.Unmarshal(m.Data, &ev.Receipt) != nil {
				s.log.Write([]byte("test: undecodable receipt: " + string(m.Data) + "\n"))
				continue
			}
			s.f.events.add(ev)
		}
		res.Body.Close()
	}
}

// fleetEvent is a capture receipt or a maintenance report, and the server
// that sent it.
type fleetEvent struct {
	server string
	typ    string // "receipt" or "maintenance"
	data   json.RawMessage
	recovery.Receipt
}

// eventLog collects the receipts and maintenance reports of every server
// of a fleet.
type eventLog struct {
	mu      sync.Mutex
	all     []fleetEvent
	changed chan struct{} // closed and replaced at every add
}

func (l *eventLog) add(ev fleetEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, ev)
	close(l.changed)
	l.changed = make(chan struct{})
}

// until calls fn on every event from the from'th on, in the order they
// arrived, as they arrive, until fn returns true; it fails the test,
// saying what() it waited for, when ctx ends first.
func (l *eventLog) until(t testing.TB, ctx context.Context, what func() string, from int, fn func(fleetEvent) bool) {
	t.Helper()
	next := from
	for {
		l.mu.Lock()
		batch, changed := l.all[next:], l.changed
		l.mu.Unlock()
		for _, r := range batch {
			next++
			if fn(r) {
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what(), ctx.Err())
		}
	}
}

// summary counts the events by server, type and outcome.
func (l *eventLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := map[string]int{}
	for _, ev := range l.all {
		counts[ev.server+" "+ev.typ+" "+string(ev.Outcome)]++
	}
	return fmt.Sprint(counts)
}

// history is a line per receipt of workspace ws, in the order they
// arrived: for a failure's message.
func (l *eventLog) history(ws string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, ev := range l.all {
		if ev.typ == "receipt" && ev.Workspace == ws {
			fmt.Fprintf(&b, "  %s %s %s snapshot %.12s last good %.12s %s..%s files %d\n", ev.server, ev.Reason, ev.Outcome, ev.Snapshot, ev.LastGood,
				ev.Started.Format("15:04:05.000"), ev.Finished.Format("15:04:05.000"), ev.Files)
		}
	}
	return b.String()
}

// serverLines is every line of every server's log, this run and
// earlier ones, that contains sub: for a failure's message.
func (f *fleet) serverLines(sub string) string {
	var b strings.Builder
	for _, s := range f.servers {
		for _, l := range s.logs {
			l.mu.Lock()
			for _, line := range l.lines {
				if strings.Contains(line, sub) {
					fmt.Fprintf(&b, "  %s: %s\n", s.name, line)
				}
			}
			l.mu.Unlock()
		}
	}
	return b.String()
}

// record is workspace id's record and recovery state as a running
// server shows them: for a failure's message.
func (f *fleet) record(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range f.servers {
		select {
		case <-s.exited:
			continue
		default:
		}
		w, err := s.client().Workspace(ctx, id)
		st, serr := s.client().RecoveryState(ctx, id)
		wj, _ := json.Marshal(w)
		sj, _ := json.Marshal(st)
		return fmt.Sprintf("(server %s) %s %v\n  its recovery state: %s %v\n", s.name, wj, err, sj, serr)
	}
	return "no server runs\n"
}

// len is how many events arrived so far.
func (l *eventLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

func (l *eventLog) snapshot() []fleetEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fleetEvent(nil), l.all...)
}

// requestSummary counts the S3 requests the proxy saw by method and the
// repository folder they went to (a LIST by its prefix).
func (f *fleet) requestSummary() string { return f.requestSummaryFrom(0) }

// requestSummaryFrom is requestSummary of the requests after the first
// from.
func (f *fleet) requestSummaryFrom(from int) string {
	counts := map[string]int{}
	for _, ex := range f.proxy.Log()[from:] {
		parts := strings.Split(strings.Trim(ex.Path, "/"), "/")
		where := "bucket"
		if len(parts) >= 3 {
			where = parts[2]
		}
		counts[ex.Method+" "+where]++
	}
	return fmt.Sprint(counts)
}

// requestsFor is a line per S3 request whose path contains sub: for a
// failure's message.
func (f *fleet) requestsFor(sub string) string {
	var b strings.Builder
	for _, ex := range f.proxy.Log() {
		if strings.Contains(ex.Path, sub) {
			fmt.Fprintf(&b, "  S3 %s %s %d at %s\n", ex.Method, ex.Path, ex.Status, ex.Done.Format("15:04:05.000"))
		}
	}
	return b.String()
}

// lineLog is a process's stderr: its lines, and waiters for a line that
// contains a string.
type lineLog struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	waiters []lineWaiter
}

type lineWaiter struct {
	sub string
	ch  chan struct{}
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := strings.IndexByte(string(l.partial), '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		l.lines = append(l.lines, line)
		kept := l.waiters[:0]
		for _, w := range l.waiters {
			if strings.Contains(line, w.sub) {
				close(w.ch)
			} else {
				kept = append(kept, w)
			}
		}
		l.waiters = kept
	}
	return len(p), nil
}

// wait returns a channel closed at the first line from now on that
// contains sub.
func (l *lineLog) wait(sub string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	l.waiters = append(l.waiters, lineWaiter{sub, ch})
	return ch
}

// String is the last lines, for a failure's message.
func (l *lineLog) String() string { return l.last(60) }

// last is the last n lines.
func (l *lineLog) last(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-n):], "\n")
}

// writeSmallWorkspace writes a small agent workspace: a README every
// workspace shares (deduplicated), and a source file, a script and a
// data file of its own, different for every version.
func writeSmallWorkspace(t testing.TB, dir string, n, version int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(version)))
	data := make([]byte, 4096+rng.IntN(8192))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	files := []struct {
		name string
		mode os.FileMode
		data []byte
	}{
		{"README.md", 0o644, []byte(strings.Repeat("This workspace belongs to an agent of the fleet test.\n", 40))},
		{"src/main.go", 0o644, fmt.Appendf(nil, "package main\n\n// workspace %d, version %d\nfunc main() { println(%d) }\n", n, version, rng.Uint64())},
		{"bin/run.sh", 0o755, fmt.Appendf(nil, "#!/bin/sh\necho workspace %d version %d\n", n, version)},
		{"data/state.bin", 0o600, data},
	}
	for _, fl := range files {
		p := filepath.Join(dir, fl.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, fl.data, fl.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, fl.mode); err != nil {
			t.Fatal(err)
		}
	}
}

// addWorkspaces makes n workspaces ws0000... with their instances in the
// provider's root, registered round-robin through the servers.
func (f *fleet) addWorkspaces(ctx context.Context, n int, servers ...*fleetServer) []string {
	f.t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for part := range 4 {
		wg.Go(func() {
			for i := part; i < n; i += 4 {
				id := fmt.Sprintf("ws%05d", i)
				ids[i] = id
				writeSmallWorkspace(f.t, filepath.Join(f.root, id), i, 0)
				if _, err := servers[i%len(servers)].client().AddWorkspace(ctx, server.AddWorkspace{ID: id, Provider: "local", Instance: id}); err != nil {
					errs <- fmt.Errorf("adding workspace %s: %w", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
	return ids
}

// instances lists the instance directories in the provider's root.
func (f *fleet) instances() []string {
	ents, err := os.ReadDir(f.root)
	f.check(err)
	var out []string
	for _, d := range ents {
		if !strings.HasPrefix(d.Name(), ".") {
			out = append(out, d.Name())
		}
	}
	return out
}

// latencies are capture latencies (Finished - Started) of receipts.
func latencies(rs []fleetEvent) []time.Duration {
	var out []time.Duration
	for _, r := range rs {
		out = append(out, r.Finished.Sub(r.Started))
	}
	return out
}
