package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lifeboat/bench"
	"lifeboat/server"
)

// serveProcess starts a real `lifeboat serve` on a free port and returns
// it with its base URL.
func (e *env) serveProcess(bin string, flags []string, tokens string) (*exec.Cmd, string, *strings.Builder) {
	e.t.Helper()
	stderr := &strings.Builder{}
	cmd, url := e.startServe(bin, flags, tokens, nil, stderr)
	return cmd, url, stderr
}

// startServe starts a real `lifeboat serve` with the global flags, extra
// environment env and serve flags serveFlags, its stderr going to stderr,
// and returns it with its base URL.
func (e *env) startServe(bin string, flags []string, tokens string, env []string, stderr io.Writer, serveFlags ...string) (*exec.Cmd, string) {
	e.t.Helper()
	cmd := exec.Command(bin, append(append(append([]string{"--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile, "--json"},
		flags...), "serve", "--listen", "127.0.0.1:0", "--tokens", tokens), serveFlags...)...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	must(e.t, err)
	cmd.Stderr = stderr
	must(e.t, cmd.Start())
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, servingURL(e.t, stdout, stderr)
}

// servingURL reads the first line a `lifeboat --json serve` prints on
// stdout, its "serving" message, and returns the address it serves on.
func servingURL(t testing.TB, stdout io.Reader, stderr any) string {
	t.Helper()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed no address: %v\n%s", err, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil || m["message_type"] != "serving" {
		t.Fatalf("serve's first line: %s %v", line, err)
	}
	return strings.TrimSuffix(m["url"].(string), "/")
}

// openEventStream opens the event stream of the server at url with token
// tok (ctx bounds the request); the caller closes the body.
func openEventStream(ctx context.Context, t *testing.T, url, tok string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v1/events", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	return res
}

func request(t *testing.T, method, url, tok string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	must(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(t, err)
	return res.StatusCode, string(b)
}

// TestServeGracefulShutdown: a real `lifeboat serve` answers the API with
// a token and refuses without one, captures through the API and streams
// the receipt; SIGTERM ends the event stream and the process exits 0.
func TestServeGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	e, flags := lifecycleEnv(t)
	writeTree(t, filepath.Join(e.dir, "root", "bot1"), 1)
	e.ok(append(flags, "workspace", "add", "bot1")...)
	tokFile := filepath.Join(e.dir, "tokens")
	const tok = "serve-test-token-51"
	must(t, os.WriteFile(tokFile, []byte("operator "+server.HashToken(tok)+" test\n"), 0o600))
	if r := e.run(append(flags, "serve", "--tokens", filepath.Join(e.dir, "none"))...); r.code != exitUsage || !strings.Contains(r.stderr, "server.tokens_file") {
		t.Fatalf("serve with a missing token file: %d %s", r.code, r.stderr)
	}

	cmd, url, stderr := e.serveProcess(lifeboatBinary(t), flags, tokFile)
	if code, body := request(t, "GET", url+"/v1/workspaces", ""); code != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("without a token: %d %s", code, body)
	}
	if code, body := request(t, "GET", url+"/v1/workspaces", tok); code != http.StatusOK || !strings.Contains(body, `"id":"bot1"`) {
		t.Fatalf("workspaces: %d %s", code, body)
	}
	if code, body := request(t, "GET", url+"/", ""); code != http.StatusOK || !strings.Contains(body, "Lifeboat") {
		t.Fatalf("status page: %d %s", code, body)
	}

	res := openEventStream(context.Background(), t, url, tok)
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	readUntil := func(prefix string) string {
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("event stream ended before %q: %v", prefix, err)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
	}
	readUntil("event: hello")

	code, body := request(t, "POST", url+"/v1/workspaces/bot1/checkpoints", tok)
	if code != http.StatusOK || !strings.Contains(body, `"outcome":"captured"`) {
		t.Fatalf("capture now: %d %s", code, body)
	}
	readUntil("event: receipt")
	if data := readUntil("data: "); !strings.Contains(data, `"outcome":"captured"`) {
		t.Fatalf("receipt event: %s", data)
	}

	must(t, cmd.Process.Signal(syscall.SIGTERM))
	if _, err := io.Copy(io.Discard, rd); err != nil {
		t.Fatalf("the event stream did not end cleanly: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("serve did not stop within a minute of SIGTERM\n%s", stderr)
	}
	// The store and the repository were released: the CLI can use them.
	if w := e.showWorkspace(flags, "bot1"); w.LastGood == nil {
		t.Fatalf("the capture made through the server is not recorded: %+v", w)
	}
}

// TestServeRecovery: a real `lifeboat serve` runs the recovery service. A
// workspace captured by the CLI whose instance directory is then removed
// is found lost (at start, or when the state is read); an approval sent
// twice with one key is one operation, followed on the event stream to
// recovered; the replacement holds the captured tree, the workspace id is
// unchanged, and after SIGTERM the CLI sees the new instance.
func TestServeRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	e, flags := lifecycleEnv(t)
	inst := filepath.Join(e.dir, "root", "bot1")
	writeTree(t, inst, 7)
	e.ok(append(flags, "workspace", "add", "bot1")...)
	e.ok(append(flags, "capture", "--workspace", "bot1")...)
	// The sandbox is lost: its directory leaves the provider's root (kept
	// aside, times and all, to compare the replacement with).
	want := filepath.Join(e.dir, "want")
	must(t, os.Rename(inst, want))
	tokFile := filepath.Join(e.dir, "tokens")
	const tok = "serve-recovery-token-8"
	must(t, os.WriteFile(tokFile, []byte("user "+server.HashToken(tok)+" inbox\n"), 0o600))
	cmd, url, stderr := e.serveProcess(lifeboatBinary(t), flags, tokFile)

	var st server.RecoveryState
	code, body := request(t, "GET", url+"/v1/workspaces/bot1/recovery", tok)
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.State != server.StateLost || st.Offer == nil {
		t.Fatalf("recovery state: %d %s", code, body)
	}
	res := openEventStream(context.Background(), t, url, tok)
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)

	approve := func() server.Operation {
		return approveRecovery(t, url, tok, "bot1", st.Offer.Checkpoint, "serve-approve-1")
	}
	op := approve()
	if again := approve(); again.ID != op.ID {
		t.Fatalf("the second approval with the same key made operation %s, the first %s", again.ID, op.ID)
	}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream ended before the operation did: %v\n%s", err, stderr)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"operation"`) && strings.Contains(line, op.ID) {
			if strings.Contains(line, `"step":"failed"`) {
				t.Fatalf("operation failed: %s", line)
			}
			if strings.Contains(line, `"step":"recovered"`) {
				break
			}
		}
	}
	code, body = request(t, "GET", url+"/v1/operations/"+op.ID, tok)
	if code != http.StatusOK || json.Unmarshal([]byte(body), &op) != nil || op.Step != "recovered" || op.NewInstance == "" {
		t.Fatalf("operation: %d %s", code, body)
	}
	if d, err := bench.Compare(want, filepath.Join(e.dir, "root", op.NewInstance)); err != nil || len(d) > 0 {
		t.Fatalf("the replacement differs from the captured tree: %v %v", d, err)
	}

	must(t, cmd.Process.Signal(syscall.SIGTERM))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr)
	}
	if w := e.showWorkspace(flags, "bot1"); w.ID != "bot1" || string(w.Instance) != op.NewInstance || w.Generation == 0 {
		t.Fatalf("workspace after recovery: %+v", w)
	}
}
