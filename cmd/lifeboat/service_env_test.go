package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/internal/ssetest"
	"lifeboat/server"
)

// svcEnv is a real `lifeboat serve` process started from a config file,
// with a repository, a state store, a local provider instance "local"
// whose root is root, a user token and an operator token (the CLI's).
type svcEnv struct {
	*env
	bin      string
	root     string // the local provider's root
	state    string
	cfgPath  string
	userTok  string
	opTok    string
	url      string
	cmd      *exec.Cmd
	stderr   *lineWatch
	watch    string // the stderr line start watches for (stderr.found); default the stop line
	stopped  bool
	extraTOM string
}

// serveConfig names the files and directories a test's serve config
// starts with.
type serveConfig struct {
	repo, passwordFile, cache string // [repository]
	state                     string // [state] dir
	tokens                    string // [server] tokens_file
	clientToken               string // [server] token_file; empty: none
}

// head is the config's [repository], [state] and [server] sections (the
// server listens on a free port of 127.0.0.1); the caller appends the
// rest.
func (c serveConfig) head() string {
	h := fmt.Sprintf(`[repository]
location = %q
password_file = %q
cache_dir = %q

[state]
dir = %q

[server]
listen = "127.0.0.1:0"
tokens_file = %q
`, c.repo, c.passwordFile, c.cache, c.state, c.tokens)
	if c.clientToken != "" {
		h += fmt.Sprintf("token_file = %q\n", c.clientToken)
	}
	return h
}

// newSvcEnv writes the config (with extra TOML appended) and makes the
// repository; start runs the server.
func newSvcEnv(t *testing.T, extra string) *svcEnv {
	t.Helper()
	e := newEnv(t)
	t.Setenv("LIFEBOAT_STATE_DIR", "")
	t.Setenv("LIFEBOAT_LOCAL_ROOT", "")
	e.init()
	s := &svcEnv{env: e, root: filepath.Join(e.dir, "root"), state: filepath.Join(e.dir, "state"),
		cfgPath: filepath.Join(e.dir, "lifeboat.toml"), userTok: "user-token-" + filepath.Base(e.dir), opTok: "operator-token-" + filepath.Base(e.dir)}
	must(t, os.MkdirAll(s.root, 0o755))
	tokens := filepath.Join(e.dir, "tokens")
	must(t, os.WriteFile(tokens, []byte("user "+server.HashToken(s.userTok)+" inbox\noperator "+server.HashToken(s.opTok)+" cli\n"), 0o600))
	clientTok := filepath.Join(e.dir, "cli-token")
	must(t, os.WriteFile(clientTok, []byte(s.opTok+"\n"), 0o600))
	cfg := serveConfig{repo: e.repo, passwordFile: e.passwdFile, cache: e.cache, state: s.state, tokens: tokens, clientToken: clientTok}.head() +
		fmt.Sprintf(`
[lifecycle]
periodic_interval = "off"
redact = ["secret-[0-9]+"]

[providers.local]
type = "local"
root = %q
`, s.root) + extra
	must(t, os.WriteFile(s.cfgPath, []byte(cfg), 0o600))
	return s
}

// start runs `lifeboat serve --config` and waits for its address.
func (s *svcEnv) start(env ...string) {
	s.t.Helper()
	if s.bin == "" {
		s.bin = lifeboatBinary(s.t)
	}
	s.stderr = newLineWatch(cmp.Or(s.watch, "lifeboat serve: stopped"))
	s.cmd = exec.Command(s.bin, "--json", "--config", s.cfgPath, "serve")
	s.cmd.Env = append(os.Environ(), env...)
	stdout, err := s.cmd.StdoutPipe()
	must(s.t, err)
	s.cmd.Stderr = s.stderr
	must(s.t, s.cmd.Start())
	s.stopped = false
	cmd := s.cmd
	s.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s.url = servingURL(s.t, stdout, s.stderr)
}

// stop ends the server with SIGTERM; it must exit 0.
func (s *svcEnv) stop() {
	s.t.Helper()
	must(s.t, s.cmd.Process.Signal(syscall.SIGTERM))
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("serve after SIGTERM: %v\n%s", err, s.stderr)
	}
	s.stopped = true
}

// cli runs a lifeboat command in-process against the running server, as
// an operator would: --config, and the server's address.
func (s *svcEnv) cli(args ...string) result {
	s.t.Helper()
	return s.run(append([]string{"--config", s.cfgPath, "--server", s.url}, args...)...)
}

func (s *svcEnv) cliOK(args ...string) result {
	s.t.Helper()
	r := s.cli(args...)
	if r.code != 0 {
		s.t.Fatalf("lifeboat %v: exit %d\nstdout: %s\nstderr: %s\nserver: %s", args, r.code, r.stdout, r.stderr, s.stderr)
	}
	return r
}

// cliJSON runs a command with --json and returns its last message.
func (s *svcEnv) cliJSON(args ...string) map[string]any {
	s.t.Helper()
	lines := jsonLines(s.t, s.cliOK(append([]string{"--json"}, args...)...).stdout)
	if len(lines) == 0 {
		s.t.Fatalf("lifeboat %v printed nothing", args)
	}
	return lines[len(lines)-1]
}

// addConfig appends extra to the server's config file.
func (s *svcEnv) addConfig(extra string) {
	s.t.Helper()
	cfg, err := os.ReadFile(s.cfgPath)
	must(s.t, err)
	must(s.t, os.WriteFile(s.cfgPath, append(cfg, extra...), 0o600))
}

// checkConfig runs `lifeboat config check` on the server's config, which
// must pass.
func (s *svcEnv) checkConfig() {
	s.t.Helper()
	if r := s.run("config", "check", s.cfgPath); r.code != 0 {
		s.t.Fatalf("config check: %s %s", r.stdout, r.stderr)
	}
}

// stopLogWithout stops the server, whose log must not hold secret (what
// names it, for the failure).
func (s *svcEnv) stopLogWithout(secret, what string) {
	s.t.Helper()
	s.stop()
	if strings.Contains(s.stderr.String(), secret) {
		s.t.Fatal("the server's log holds " + what)
	}
}

// parkCaptured parks bot1, which must capture (how says where, for the
// failure), and returns the snapshot.
func (s *svcEnv) parkCaptured(how string) string {
	s.t.Helper()
	park := s.cliJSON("park", "bot1")
	if park["outcome"] != "captured" {
		s.t.Fatalf("park %s: %v", how, park)
	}
	return park["snapshot"].(string)
}

// sandbox makes a local instance directory holding the tree of seed.
func (s *svcEnv) sandbox(id string, seed uint64) string {
	s.t.Helper()
	dir := filepath.Join(s.root, id)
	writeTree(s.t, dir, seed)
	return dir
}

// addLocalWorkspace makes a local instance id holding the tree of seed
// and registers it as workspace id through the running server; it
// returns the instance directory.
func (s *svcEnv) addLocalWorkspace(id string, seed uint64) string {
	s.t.Helper()
	dir := s.sandbox(id, seed)
	s.cliOK("workspace", "add", id, "--provider", "local")
	return dir
}

// client is a Go client of the server with the operator token.
func (s *svcEnv) client() *server.Client {
	return &server.Client{BaseURL: s.url, Token: s.opTok}
}

// stdinRun runs a command against the server with stdin.
func (s *svcEnv) stdinRun(stdin io.Reader, args ...string) {
	s.t.Helper()
	full := append([]string{"--repo", s.repo, "--cache-dir", s.cache, "--password-file", s.passwdFile, "--config", s.cfgPath, "--server", s.url}, args...)
	var out, errb bytes.Buffer
	if code := run(context.Background(), full, stdin, &out, &errb); code != 0 {
		s.t.Fatalf("lifeboat %v: exit %d\n%s%s", args, code, out.String(), errb.String())
	}
}

// eventStream reads the server's event stream.
type eventStream struct {
	t  *testing.T
	rd *bufio.Reader
}

// events opens the event stream (after its hello).
func (s *svcEnv) events(t *testing.T) *eventStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	res := openEventStream(ctx, t, s.url, s.userTok)
	t.Cleanup(func() { res.Body.Close() })
	es := &eventStream{t: t, rd: bufio.NewReader(res.Body)}
	for m := range es.until("hello") {
		_ = m
	}
	return es
}

// until yields the stream's messages up to and including the first of
// one of the types.
func (es *eventStream) until(types ...string) func(yield func(server.Message) bool) {
	return func(yield func(server.Message) bool) {
		for {
			ev, err := ssetest.ReadEvent(es.rd)
			if err != nil {
				es.t.Fatalf("event stream ended: %v", err)
			}
			var m server.Message
			if ev.Type != "hello" && ev.Type != "resync" {
				must(es.t, json.Unmarshal([]byte(ev.Data), &m))
			}
			m.Type = ev.Type
			if !yield(m) || slices.Contains(types, ev.Type) {
				return
			}
		}
	}
}

// heldHook is a [[quiesce.hook]] (config) whose pause writes "paused" to
// the FIFO started and then waits for a line on the FIFO released: a
// capture holds in it until the test releases it, or the capture is
// cancelled and the hook killed.
type heldHook struct{ config, started, released string }

func newHeldHook(t *testing.T) heldHook {
	t.Helper()
	dir := t.TempDir()
	h := heldHook{started: filepath.Join(dir, "started"), released: filepath.Join(dir, "release")}
	must(t, unix.Mkfifo(h.started, 0o600))
	must(t, unix.Mkfifo(h.released, 0o600))
	h.config = fmt.Sprintf(`
[[quiesce.hook]]
name = "held"
pause = ["sh", "-c", "echo paused > %s; read x < %s"]
resume = ["true"]
timeout = "5m"
`, h.started, h.released)
	return h
}

// waitPaused returns once the hook holds a capture.
func (h heldHook) waitPaused(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(h.started)
	must(t, err)
	if strings.TrimSpace(string(b)) != "paused" {
		t.Fatalf("hook wrote %q", b)
	}
}

// release lets the holding hook go on. The write blocks until the hook
// reads; a hook cancelled in the meantime never does, so the test's
// cleanup lets the writer go.
func (h heldHook) release(t *testing.T) {
	go func() { _ = os.WriteFile(h.released, []byte("go\n"), 0o600) }()
	t.Cleanup(func() {
		if f, err := os.OpenFile(h.released, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}
