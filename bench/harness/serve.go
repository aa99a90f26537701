package harness

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"lifeboat/bench"
)

// ScenarioServeUnchanged is the unchanged re-capture as `lifeboat serve`
// runs it: a long-running server that holds the unlocked keys and the
// open local index, asked through its HTTP API to checkpoint a workspace
// of the local provider whose files have not changed. Lifeboat only: the
// peers have no such service.
const ScenarioServeUnchanged = "serve-unchanged-capture"

// ScenarioServeRound is serve's own periodic round over the same
// unchanged workspace: the provider asked whether the instance runs, the
// files' fingerprint compared with the last good checkpoint's, nothing
// captured. It is what a server does for every unchanged workspace at
// each periodic interval. Lifeboat only.
const ScenarioServeRound = "serve-unchanged-round"

// ServeCaptures is how many unchanged captures the serve scenario
// measures in each round, when Options.ServeCaptures is 0.
const ServeCaptures = 10

// serveReceipt is the part of serve's capture receipt (recovery.Receipt,
// docs/json.md) the scenario reads.
type serveReceipt struct {
	Reason   string    `json:"reason"`
	Outcome  string    `json:"outcome"`
	Error    string    `json:"error"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Files    uint64    `json:"files"`
	NewBytes uint64    `json:"new_bytes"`
}

// serveUnchanged measures ScenarioServeUnchanged on the tool's copy of
// the corpus, as it is after the unchanged re-capture: in a repository
// of its own (the other scenarios' repository is left as it was), a
// first capture by the CLI (unmeasured), then a `lifeboat serve` with
// the copy registered as a workspace of the local provider (its parent
// directory is the provider's root), periodic captures off, its native
// checkpoints (a copy of the tree) daily. Through the
// API it captures once unmeasured (the server's first capture of the
// workspace: it has no last good checkpoint yet), then n times measured,
// each after a flushed file system and a warm page cache. A capture's
// time is the one serve reports in its receipt (finished - started: the
// whole request, from the lease to the retention after the promotion);
// its CPU is the server process's user + system time across the request
// (/proc, in clock ticks). The result holds the medians, every capture's
// time in Samples, and the server's peak RSS. Then the same server makes
// n periodic rounds over the workspace (ScenarioServeRound, the second
// result).
func (t *toolRound) serveUnchanged(ctx context.Context, n int) ([]Result, error) {
	d, ok := t.d.(*lifeboatDriver)
	if !ok {
		return nil, fmt.Errorf("the serve scenario runs Lifeboat only, not %s", t.name)
	}
	res, rounds, err := t.serveUnchangedSteps(ctx, d, n)
	return []Result{res, rounds}, err
}

func (t *toolRound) serveUnchangedSteps(ctx context.Context, d *lifeboatDriver, n int) (res, rounds Result, err error) {
	s := t.s
	res = Result{Round: s.round, Tool: t.name, Scenario: ScenarioServeUnchanged}
	rounds = Result{Round: s.round, Tool: t.name, Scenario: ScenarioServeRound}
	tree, err := bench.Stat(s.work)
	if err != nil {
		return res, rounds, err
	}
	res.Bytes, res.Files = tree.Bytes, tree.Files
	rounds.Bytes, rounds.Files = tree.Bytes, tree.Files
	home := filepath.Join(filepath.Dir(s.repo), "serve")
	sv := &site{round: s.round, work: s.work, repo: filepath.Join(home, "repo"), cache: filepath.Join(home, "cache"), password: s.password}
	state := filepath.Join(home, "state")
	ws := filepath.Base(s.work)
	global := []string{"--state-dir", state, "--local-root", filepath.Dir(s.work)}
	for i, c := range []command{d.cmd(sv, false, "init"), d.cmd(sv, false, "capture", "--workspace", ws, s.work),
		d.cmd(sv, false, append(global, "workspace", "add", ws)...)} {
		if _, err := measure(ctx, t.o.Trampoline, c, t.log(fmt.Sprintf("%s-before%d", ScenarioServeUnchanged, i))); err != nil {
			return res, rounds, err
		}
	}
	token, tokens, err := writeServeTokens(home)
	if err != nil {
		return res, rounds, err
	}
	var prof []string
	if t.o.CPUProfile != "" {
		p := profileFile(t.o.CPUProfile, ScenarioServeUnchanged, s.round)
		prof, res.Profiles = []string{"--cpuprofile", p}, []string{p}
	}
	args := append(append(append([]string{"--json"}, global...), prof...), "serve", "--listen", "127.0.0.1:0", "--tokens", tokens)
	c := d.cmd(sv, false, args...)
	// No periodic round beside the measured captures (the workspace's
	// own interval is set to a second for the measured rounds), and the
	// local provider's native checkpoint (a copy of the whole tree,
	// taken on its own clock, by default every 5 minutes) only at the
	// first, unmeasured capture.
	c.env = append(c.env, "LIFEBOAT_LIFECYCLE_PERIODIC_INTERVAL=24h", "LIFEBOAT_LIFECYCLE_NATIVE_INTERVAL=24h")
	srv, err := startServe(ctx, c, t.log(ScenarioServeUnchanged))
	if err != nil {
		return res, rounds, err
	}
	defer srv.kill()
	capture := func() (serveReceipt, [2]float64, error) {
		var cpu [2]float64
		before, err := procCPU(srv.cmd.Process.Pid)
		if err != nil {
			return serveReceipt{}, cpu, err
		}
		r, err := srv.capture(ctx, token, ws)
		if err != nil {
			return r, cpu, err
		}
		after, err := procCPU(srv.cmd.Process.Pid)
		return r, [2]float64{after[0] - before[0], after[1] - before[1]}, err
	}
	if r, _, err := capture(); err != nil { // the server's first capture of the workspace
		return res, rounds, err
	} else if r.Outcome != "captured" {
		return res, rounds, fmt.Errorf("serve's first capture of %s: outcome %s: %s (log %s)", ws, r.Outcome, r.Error, srv.log)
	}
	var users, syss, cpus []float64
	for range n {
		if _, err := syncFS(t.dir); err != nil {
			return res, rounds, err
		}
		for _, dir := range []string{s.work, sv.repo, sv.cache} {
			if err := warm(dir); err != nil {
				return res, rounds, err
			}
		}
		r, cpu, err := capture()
		if err != nil {
			return res, rounds, err
		}
		if r.Outcome != "captured" || r.NewBytes != 0 {
			return res, rounds, fmt.Errorf("serve's capture of the unchanged %s: outcome %s, %d new bytes: %s (log %s)", ws, r.Outcome, r.NewBytes, r.Error, srv.log)
		}
		res.Samples = append(res.Samples, r.Finished.Sub(r.Started).Seconds())
		users, syss, cpus = append(users, cpu[0]), append(syss, cpu[1]), append(cpus, cpu[0]+cpu[1])
	}
	if err := srv.periodicRounds(ctx, token, ws, n, &rounds); err != nil {
		return res, rounds, err
	}
	res.MaxRSS, err = procPeakRSS(srv.cmd.Process.Pid)
	if err != nil {
		return res, rounds, err
	}
	rounds.MaxRSS = res.MaxRSS
	if err := srv.stop(); err != nil {
		return res, rounds, err
	}
	res.Seconds = median(res.Samples)
	res.Wall, res.CPU, res.User, res.Sys = res.Seconds, median(cpus), median(users), median(syss)
	if res.Seconds > 0 {
		res.MBps = float64(res.Bytes) / 1e6 / res.Seconds
		res.FilesPerS = float64(res.Files) / res.Seconds
	}
	res.RepoBytes, err = duBytes(sv.repo)
	rounds.RepoBytes = res.RepoBytes
	return res, rounds, err
}

// periodicRounds sets workspace ws's periodic interval to a second
// (PATCH /v1/workspaces/ws) and reads the receipts of the next n periodic
// rounds from the event stream, each of which must find the files
// unchanged. Into into go the rounds' times from their receipts (started
// to finished) in Samples and their median, and the server's CPU across
// them divided by n.
func (s *server) periodicRounds(ctx context.Context, token, ws string, n int, into *Result) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n)*time.Minute)
	defer cancel()
	events, err := s.request(ctx, token, http.MethodGet, "/v1/events", "")
	if err != nil {
		return err
	}
	defer events.Body.Close()
	before, err := procCPU(s.cmd.Process.Pid)
	if err != nil {
		return err
	}
	patch, err := s.request(ctx, token, http.MethodPatch, "/v1/workspaces/"+ws, `{"periodic_interval": "1s"}`)
	if err != nil {
		return err
	}
	patch.Body.Close()
	sc := bufio.NewScanner(events.Body)
	sc.Buffer(nil, 1<<20)
	for len(into.Samples) < n && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			Type string       `json:"type"`
			Data serveReceipt `json:"data"`
		}
		if json.Unmarshal([]byte(data), &m) != nil || m.Type != "receipt" || m.Data.Reason != "periodic" {
			continue
		}
		if r := m.Data; r.Outcome != "unchanged" {
			return fmt.Errorf("serve's periodic round over the unchanged %s: outcome %s: %s (log %s)", ws, r.Outcome, r.Error, s.log)
		}
		into.Samples = append(into.Samples, m.Data.Finished.Sub(m.Data.Started).Seconds())
	}
	if len(into.Samples) < n {
		return fmt.Errorf("serve's event stream ended after %d of %d periodic rounds: %v (log %s)", len(into.Samples), n, cmp.Or(sc.Err(), ctx.Err()), s.log)
	}
	after, err := procCPU(s.cmd.Process.Pid)
	if err != nil {
		return err
	}
	into.Seconds = median(into.Samples)
	into.Wall = into.Seconds
	into.User, into.Sys = (after[0]-before[0])/float64(n), (after[1]-before[1])/float64(n)
	into.CPU = into.User + into.Sys
	if into.Seconds > 0 {
		into.MBps = float64(into.Bytes) / 1e6 / into.Seconds
		into.FilesPerS = float64(into.Files) / into.Seconds
	}
	return nil
}

// request sends an API request with the operator token and a JSON body
// (none when empty); an answer other than 2xx is an error.
func (s *server) request(ctx context.Context, token, method, path, body string) (*http.Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("serve: %s %s: %w (log %s)", method, path, err, s.log)
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("serve: %s %s: HTTP %d: %s (log %s)", method, path, resp.StatusCode, bytes.TrimSpace(b), s.log)
	}
	return resp, nil
}

// writeServeTokens writes a token file in dir with one operator token,
// stored as its SHA-256 (the form `lifeboat serve --tokens` reads:
// docs/configuration.md), and returns the token and the file.
func writeServeTokens(dir string) (string, string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	tok := hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(tok))
	path := filepath.Join(dir, "tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	err := os.WriteFile(path, []byte("operator sha256:"+hex.EncodeToString(sum[:])+" lifeboat-bench\n"), 0o600)
	return tok, path, err
}

// server is a running `lifeboat serve`.
type server struct {
	cmd  *exec.Cmd
	url  string
	log  string
	done chan error
}

// startServe starts c (a `lifeboat --json ... serve`), its stderr to the
// file log, and waits for the address it prints first on stdout.
func startServe(ctx context.Context, c command, log string) (*server, error) {
	out, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, c.path, c.args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c, err)
	}
	s := &server{cmd: cmd, log: log, done: make(chan error, 1)}
	line, rerr := bufio.NewReader(stdout).ReadString('\n')
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		s.done <- cmd.Wait()
	}()
	var m struct {
		Type string `json:"message_type"`
		URL  string `json:"url"`
	}
	if rerr != nil || json.Unmarshal([]byte(line), &m) != nil || m.Type != "serving" || m.URL == "" {
		s.kill()
		return nil, fmt.Errorf("%s: no serving address on its first line (%q, %v); output in %s", c, line, rerr, log)
	}
	s.url = strings.TrimSuffix(m.URL, "/")
	return s, nil
}

// capture asks the server to checkpoint workspace ws now and returns its
// receipt.
func (s *server) capture(ctx context.Context, token, ws string) (serveReceipt, error) {
	var r serveReceipt
	resp, err := s.request(ctx, token, http.MethodPost, "/v1/workspaces/"+ws+"/checkpoints", "")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Started.IsZero() {
		return r, fmt.Errorf("serve: capture of %s: HTTP %d, no receipt: %s (log %s)", ws, resp.StatusCode, bytes.TrimSpace(body), s.log)
	}
	return r, nil
}

// stop ends the server with SIGTERM (it writes its profiles then) and
// waits for it.
func (s *server) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			return fmt.Errorf("serve exited: %w (log %s)", err, s.log)
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("serve did not exit within a minute of SIGTERM (log %s)", s.log)
	}
}

// kill ends the server if it still runs.
func (s *server) kill() {
	select {
	case err := <-s.done:
		s.done <- err
	default:
		_ = s.cmd.Process.Kill()
		s.done <- <-s.done
	}
}

// procCPU is the user and system CPU seconds process pid has used
// (/proc/PID/stat, in clock ticks of 1/100 s).
func procCPU(pid int) ([2]float64, error) {
	var cpu [2]float64
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return [2]float64{}, err
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return cpu, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return cpu, errors.New("malformed /proc stat")
	}
	for k, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpu, err
		}
		cpu[k] = float64(v) / 100
	}
	return cpu, nil
}

// procPeakRSS is process pid's peak resident set (VmHWM), in bytes.
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}
