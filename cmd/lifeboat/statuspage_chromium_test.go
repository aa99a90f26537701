package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"lifeboat/internal/chromiumtest"
	"lifeboat/internal/nstest"
	"lifeboat/server"
)

var update = flag.Bool("update", false, "rewrite the status page screenshots in testdata/screenshots when they changed")

const (
	pageUserToken     = "status-page-user-token-31"
	pageOperatorToken = "status-page-operator-token-32"
)

// pageServe is a real `lifeboat serve` started from a config file.
type pageServe struct {
	t      *testing.T
	url    string
	stderr *lineWatch
}

// startPageServe starts `lifeboat --config cfg --json serve` and reads its
// address from the first line it prints; the test's cleanup kills it.
func startPageServe(t *testing.T, bin, cfg string) *pageServe {
	t.Helper()
	s := &pageServe{t: t, stderr: newLineWatch("lifeboat serve: stopped")}
	cmd := exec.Command(bin, "--config", cfg, "--json", "serve")
	cmd.Env = append(os.Environ(), "LIFEBOAT_CONFIG=")
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = s.stderr
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("serve stderr:\n%s", s.stderr)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed no address: %v\n%s", err, s.stderr)
	}
	var m struct {
		MessageType string `json:"message_type"`
		URL         string `json:"url"`
	}
	must(t, json.Unmarshal([]byte(line), &m))
	if m.MessageType != "serving" {
		t.Fatalf("serve's first line: %s", line)
	}
	s.url = strings.TrimSuffix(m.URL, "/")
	return s
}

// call sends a request with a JSON body (none when nil) and decodes the
// answer into out (when not nil); an answer other than want fails the test.
func (s *pageServe) call(want int, method, path, tok string, body, out any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must(s.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	must(s.t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	must(s.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(s.t, err)
	if res.StatusCode != want {
		s.t.Fatalf("%s %s: %d %s\nserve stderr:\n%s", method, path, res.StatusCode, b, s.stderr)
	}
	if out != nil {
		must(s.t, json.Unmarshal(b, out))
	}
}

// fillDisk writes a file into the filesystem of dir that leaves it only
// about `left` bytes free.
func fillDisk(t *testing.T, dir string, left int64) {
	t.Helper()
	var st syscall.Statfs_t
	must(t, syscall.Statfs(dir, &st))
	free := int64(st.Bavail) * st.Bsize
	if free <= left {
		t.Fatalf("%s has only %d bytes free, want more than %d", dir, free, left)
	}
	must(t, os.WriteFile(filepath.Join(dir, "ballast.bin"), bytes.Repeat([]byte{0x5a}, int(free-left)), 0o644))
}

// writeFiles writes files (path -> content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

// corruptObject flips a byte of the repository file named id, so it no
// longer hashes to its name.
func corruptObject(t *testing.T, repo, id string) {
	t.Helper()
	var path string
	must(t, filepath.WalkDir(repo, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == id {
			path = p
		}
		return err
	}))
	if path == "" {
		t.Fatalf("no file %s in the repository %s", id, repo)
	}
	b, err := os.ReadFile(path)
	must(t, err)
	b[len(b)/2] ^= 0xff
	must(t, os.Chmod(path, 0o644))
	must(t, os.WriteFile(path, b, 0o644))
}

// normalizeScreen replaces, in the text the page shows, what differs from
// run to run (ids, times, ages, the test's directories, the event number)
// with fixed text of the same shape, for as long as the screenshot is
// taken: a MutationObserver applies it again to whatever a reload renders.
func normalizeScreen(c *chromiumtest.Browser, tmp string) {
	q, err := json.Marshal(tmp)
	if err != nil {
		panic(err)
	}
	c.Eval(`(() => {
		const tmp = `+string(q)+`;
		const rules = [
			[(s) => s.split(tmp).join("/tmp/lifeboat-test")],
			[(s) => s.replace(/\d{1,2}\/\d{1,2}\/\d{4}, \d{1,2}:\d{2}:\d{2}\s[AP]M/g, "11/29/2026, 11:00:00 AM")],
			[(s) => s.replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})/g, "2026-11-29T11:00:00Z")],
			[(s) => s.replace(/[0-9a-f]{8,}/g, (m) => "5f1c0ffee0ddba11".repeat(8).slice(0, m.length))],
			[(s) => s.replace(/\b\d+ (s|min|h|days)\b/g, "42 s")],
			[(s) => s.replace(/^#\d+$/, "#7")],
		];
		const fix = () => {
			const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
			for (let n = w.nextNode(); n; n = w.nextNode()) {
				let s = n.data;
				for (const [r] of rules) s = r(s);
				if (s !== n.data) n.data = s;
			}
		};
		fix();
		window.__normalizer = new MutationObserver(fix);
		window.__normalizer.observe(document.body, { subtree: true, childList: true, characterData: true });
		return true;
	})()`, nil)
}

// screenshotPage checks the page fits its width, and compares a
// normalized full-page screenshot with the golden one; then the page
// shows the real text again.
func screenshotPage(t *testing.T, c *chromiumtest.Browser, golden chromiumtest.Golden, tmp, name string, width int) {
	t.Helper()
	chromiumtest.FitsWidth(t, c)
	normalizeScreen(c, tmp)
	golden.Check(t, name, c.Screenshot(true), width)
	c.Eval(`window.__normalizer.disconnect(); load().then(() => true)`, nil)
}

type pausedRequest struct {
	RequestID string `json:"requestId"`
	Request   struct {
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	} `json:"request"`
	ResponseStatusCode int `json:"responseStatusCode"`
}

func (p pausedRequest) header(name string) string {
	for k, v := range p.Request.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// TestStatusPageRealServe drives the status page in headless Chromium, at
// 1280x800 and 375x740, against a real `lifeboat serve` started from a
// config file, through a real story:
//
//   - two workspaces registered over the API on two local provider
//     instances ("small" on a 8 MiB tmpfs, "local" on the test's disk),
//     captured (bot-a twice; bot-b with a registered process);
//   - bot-a's last good checkpoint is damaged in the repository and its
//     directory removed; "check now" on the page shows it lost, with the
//     offer's two candidates (the last good one not readable, the earlier
//     one offered) and the warning;
//   - approved with the page's button, the recovery's copy-back fills the
//     tmpfs part-way (ENOSPC after writing started): the page shows the
//     failed operation's error and what fixes it, and the repair hold
//     with its kept replacement, provider, stop receipt (stopped) and the
//     operator's resolve command, as the operator API reports them;
//   - bot-b's directory removed, "check now" and approve on the page: it
//     is recovered, and its lost process shows with a restart button.
//     The answer to the first press is lost (the browser resets it after
//     the server ran the command): the page says the restart failed, and
//     the second press sends the same idempotency key, so the page shows
//     it restarted while the command ran exactly once.
//
// At each width the layout fits without scrolling sideways, nothing
// breaks the content security policy, and full-page screenshots (lost,
// then final) are compared with testdata/screenshots (-update rewrites
// them) after the text that differs between runs is normalized.
func TestStatusPageRealServe(t *testing.T) {
	chromium := chromiumtest.Binary(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: the repair hold is made by a real full disk, and mounting a tmpfs needs root")
	}
	lb := lifeboatBinary(t)
	for _, vp := range []struct {
		name          string
		width, height int
		mobile        bool
	}{{"desktop", 1280, 800, false}, {"narrow", 375, 740, true}} {
		t.Run(vp.name, func(t *testing.T) {
			statusPageStory(t, lb, chromium, vp.name, vp.width, vp.height, vp.mobile)
		})
	}
}

func statusPageStory(t *testing.T, lb, chromium, name string, width, height int, mobile bool) {
	e := newEnv(t)
	e.init()
	small := nstest.Tmpfs(t, "size=8m,mode=0755") // the provider root a recovery fills up
	root := filepath.Join(e.dir, "root")
	tokens := filepath.Join(e.dir, "tokens")
	must(t, os.WriteFile(tokens, []byte("user "+server.HashToken(pageUserToken)+" inbox\noperator "+server.HashToken(pageOperatorToken)+" ops-alice\n"), 0o600))
	cfg := filepath.Join(e.dir, "lifeboat.toml")
	head := serveConfig{repo: e.repo, passwordFile: e.passwdFile, cache: e.cache, state: filepath.Join(e.dir, "state"), tokens: tokens}.head()
	must(t, os.WriteFile(cfg, []byte(head+fmt.Sprintf(`
[lifecycle]
check_interval = "1h"
periodic_interval = "off"

[providers.local]
type = "local"
root = %q

[providers.small]
type = "local"
root = %q
`, root, small)), 0o600))
	writeFiles(t, filepath.Join(small, "bot-a"), map[string]string{"notes.txt": "first notes\n", "app/main.go": "package main\n"})
	must(t, os.WriteFile(filepath.Join(small, "bot-a", "big.bin"), bytes.Repeat([]byte("lifeboat "), 1<<17), 0o644)) // 1.1 MiB
	writeFiles(t, filepath.Join(root, "bot-b"), map[string]string{"README.md": "bot-b\n", "app/server.js": "listen(3000)\n"})

	s := startPageServe(t, lb, cfg)
	s.call(http.StatusCreated, "POST", "/v1/workspaces", pageUserToken, map[string]string{"id": "bot-a", "provider": "small", "instance": "bot-a"}, nil)
	s.call(http.StatusCreated, "POST", "/v1/workspaces", pageUserToken, map[string]string{"id": "bot-b", "provider": "local", "instance": "bot-b"}, nil)
	var proc struct{ ID string }
	s.call(http.StatusCreated, "POST", "/v1/workspaces/bot-b/processes", pageUserToken,
		map[string]any{"command": []string{"sh", "-c", "echo restarted >> restarts.log"}, "dir": "/workspace/app"}, &proc)
	req, err := http.NewRequest("POST", s.url+"/v1/workspaces/bot-b/processes/"+proc.ID+"/output", strings.NewReader("server listening on :3000\n"))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+pageUserToken)
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("process output: %d", res.StatusCode)
	}
	capture := func(ws string) string {
		var r struct{ Outcome, Snapshot string }
		s.call(http.StatusOK, "POST", "/v1/workspaces/"+ws+"/checkpoints", pageUserToken, nil, &r)
		if r.Outcome != "captured" || r.Snapshot == "" {
			t.Fatalf("capture of %s: %+v", ws, r)
		}
		return r.Snapshot
	}
	earlier := capture("bot-a")
	writeFiles(t, filepath.Join(small, "bot-a"), map[string]string{"notes.txt": "second notes\n"})
	damaged := capture("bot-a")
	capture("bot-b")

	// bot-a is lost with its last good checkpoint damaged, and the disk
	// of its provider is nearly full.
	corruptObject(t, e.repo, damaged)
	must(t, os.RemoveAll(filepath.Join(small, "bot-a")))
	fillDisk(t, small, 256<<10)

	c := chromiumtest.Start(t, chromium)
	c.Viewport(width, height, mobile)
	c.WatchCSP()
	c.Navigate(s.url + "/#token=" + pageUserToken)
	c.WaitFor(`document.body.dataset.loaded === "true" && document.getElementById("live").textContent === "live"`)
	golden := chromiumtest.Golden{Dir: filepath.Join("testdata", "screenshots"), Update: *update}
	tmp := filepath.Dir(e.dir)

	// Check now: lost, with the candidates and the warning.
	c.Click(`#ws-bot-a button.check`)
	c.WaitFor(`document.querySelector("#ws-bot-a").dataset.state === "lost" && document.querySelectorAll("#ws-bot-a .candidates li").length === 2`)
	var offer struct {
		Candidates []struct{ Checkpoint, Readable string }
		Approve    string
		Warning    string
	}
	c.Eval(`(() => ({
		Candidates: [...document.querySelectorAll("#ws-bot-a .candidates li")].map((li) => ({ Checkpoint: li.dataset.checkpoint, Readable: li.dataset.readable })),
		Approve: document.querySelector("#ws-bot-a button.approve").dataset.checkpoint,
		Warning: document.querySelector("#ws-bot-a .warning").textContent,
	}))()`, &offer)
	if len(offer.Candidates) != 2 || offer.Candidates[0].Checkpoint != damaged || offer.Candidates[0].Readable != "false" ||
		offer.Candidates[1].Checkpoint != earlier || offer.Candidates[1].Readable != "true" || offer.Approve != earlier ||
		!strings.Contains(offer.Warning, "cannot be read") {
		t.Fatalf("bot-a's offer (damaged %s, earlier %s): %+v", damaged, earlier, offer)
	}
	c.TextHas("ws-bot-a", "Recovery offer", "not readable", "last good", "readable", "offered", "Approve recovery from "+earlier[:12])
	c.TextHas("ws-bot-b", "healthy", "Check now")
	screenshotPage(t, c, golden, tmp, "serve-lost-"+name+".png", width)

	// Approve: the copy-back fills the disk after writing started.
	c.Click(`#ws-bot-a button.approve`)
	c.WaitFor(`(() => { const a = document.querySelector("#ws-bot-a");
		return a.dataset.state === "failed" && a.querySelector(".operation.failed") && a.querySelector(".hold[data-stopped=true]") && a.querySelector("button.approve"); })()`)
	var holds []server.RepairHold
	s.call(http.StatusOK, "GET", "/v1/repair-holds", pageOperatorToken, nil, &holds)
	if len(holds) != 1 || holds[0].Workspace != "bot-a" || holds[0].Provider != "small" || holds[0].Checkpoint != earlier ||
		holds[0].Stop == nil || !holds[0].Stop.Stopped || holds[0].TargetInstance == "" {
		t.Fatalf("repair holds: %+v", holds)
	}
	h := holds[0]
	var op server.Operation
	s.call(http.StatusOK, "GET", "/v1/operations/"+h.Operation, pageUserToken, nil, &op)
	if op.Step != "failed" || !strings.Contains(op.Error, "no space left on device") || !strings.Contains(op.Action, h.ID) {
		t.Fatalf("operation: %+v", op)
	}
	if _, err := os.Stat(filepath.Join(small, h.TargetInstance)); err != nil {
		t.Fatalf("the held replacement is not kept: %v", err)
	}
	c.TextHas("ws-bot-a", "Recovery failed", h.Operation, "no space left on device", "after_write", "What fixes it",
		"an operator resolves repair hold "+h.ID, "Repair holds", h.ID, "Kept replacement", h.TargetInstance, "small",
		"stopped", "provider small stopped instance "+h.TargetInstance, "lifeboat recovery resolve "+h.ID, "Recovery offer")

	// bot-b: lost, checked, approved, recovered; its lost process shows.
	must(t, os.RemoveAll(filepath.Join(root, "bot-b")))
	c.Click(`#ws-bot-b button.check`)
	c.WaitFor(`document.querySelector("#ws-bot-b").dataset.state === "lost" && document.querySelector("#ws-bot-b button.approve")`)
	c.Click(`#ws-bot-b button.approve`)
	c.WaitFor(`document.querySelector("#ws-bot-b").dataset.state === "healthy" && document.querySelector("#ws-bot-b li.proc[data-state=lost] button.restart")`)
	c.TextHas("ws-bot-b", "Processes the last recovery lost", "sh -c echo restarted >> restarts.log", "/workspace/app",
		"server listening on :3000", "lost", "Restart sh")
	var ws struct{ Instance string }
	s.call(http.StatusOK, "GET", "/v1/workspaces/bot-b", pageUserToken, nil, &ws)
	if ws.Instance == "" || ws.Instance == "bot-b" {
		t.Fatalf("bot-b after the recovery: %+v", ws)
	}
	restarts := func() string {
		b, err := os.ReadFile(filepath.Join(root, ws.Instance, "restarts.log"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}

	// Restart: the answer to the first press is lost, the second press
	// sends the same key. The page's reloads of the process list are held
	// meanwhile, so it shows what the answers say, not the event stream.
	c.WaitFor(`document.body.dataset.loading === "false"`)
	paused, cancel := c.Subscribe("Fetch.requestPaused")
	defer cancel()
	c.Call("Fetch.enable", map[string]any{"patterns": []map[string]string{
		{"urlPattern": "*/processes/*/restart", "requestStage": "Response"},
		{"urlPattern": "*/v1/workspaces/*/processes", "requestStage": "Request"},
	}}, nil)
	var held []string
	var keys []string
	answer := func(how string) {
		for {
			var p pausedRequest
			must(t, json.Unmarshal(c.Wait(paused, "a paused request"), &p))
			if !strings.HasSuffix(p.Request.URL, "/restart") {
				held = append(held, p.RequestID)
				continue
			}
			if p.ResponseStatusCode != http.StatusAccepted {
				t.Fatalf("restart answered %d", p.ResponseStatusCode)
			}
			keys = append(keys, p.header("Idempotency-Key"))
			if how == "lose" {
				c.Call("Fetch.failRequest", map[string]any{"requestId": p.RequestID, "errorReason": "ConnectionReset"}, nil)
			} else {
				c.Call("Fetch.continueRequest", map[string]any{"requestId": p.RequestID}, nil)
			}
			return
		}
	}
	c.Click(`#ws-bot-b button.restart`)
	answer("lose")
	if got := restarts(); got != "restarted\n" {
		t.Fatalf("after the first press, restarts.log holds %q", got)
	}
	c.WaitFor(`(() => { const e = document.getElementById("error"), b = document.querySelector("#ws-bot-b button.restart");
		return !e.hidden && e.textContent.includes("Restart of sh -c") && b && !b.disabled; })()`)
	c.Click(`#ws-bot-b button.restart`)
	answer("pass")
	c.Call("Fetch.disable", map[string]any{}, nil)
	for more := true; more; {
		select {
		case ev := <-paused:
			var p pausedRequest
			must(t, json.Unmarshal(ev, &p))
			held = append(held, p.RequestID)
		default:
			more = false
		}
	}
	for _, id := range held {
		_ = c.TryCall("Fetch.continueRequest", map[string]any{"requestId": id}, nil) // released already when Fetch.disable does it
	}
	c.WaitFor(`document.querySelector("#ws-bot-b li.proc").dataset.state === "restarted" && !document.querySelector("#ws-bot-b button.restart") &&
		document.getElementById("error").hidden`)
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("the two presses sent the idempotency keys %q", keys)
	}
	if got := restarts(); got != "restarted\n" {
		t.Fatalf("after the second press, restarts.log holds %q: the command ran again", got)
	}
	c.TextHas("ws-bot-b", "restarted")
	screenshotPage(t, c, golden, tmp, "serve-final-"+name+".png", width)
	if v := c.CSPViolations(); len(v) > 0 {
		t.Fatalf("content security policy violations: %v", v)
	}
}
