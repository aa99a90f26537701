package server

import (
	"flag"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeboat/internal/chromiumtest"
	"lifeboat/recovery"
)

var update = flag.Bool("update", false, "rewrite the status page screenshots in testdata/screenshots when they changed")

// TestStatusPageServed: the page and its assets need no token, hold no
// data, and are served with a restrictive content security policy.
func TestStatusPageServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for path, typ := range map[string]string{"/": "text/html", "/static/app.js": "text/javascript", "/static/style.css": "text/css"} {
		code, body, h := e.do("GET", path, "", nil)
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), typ) || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("GET %s: %d %v", path, code, h)
		}
		if len(body) == 0 {
			t.Fatalf("GET %s: empty", path)
		}
	}
	e.fails(http.StatusNotFound, "no_such_route", "GET", "/static/missing.js", "", nil)
}

// pageStates gives the fake backend one workspace of each kind the page
// shows: lost with an offer whose last good checkpoint cannot be read (so
// an earlier candidate is offered, with a warning), failed with a repair
// hold (lost again, offered again), and recovered with a lost process to
// restart.
func pageStates(e *env) {
	e.workspace("bot-lost", map[string]string{"a.txt": "a"})
	e.workspace("bot-held", map[string]string{"h.txt": "h"})
	e.workspace("bot-ok", map[string]string{"b.txt": "b"})
	at := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	st, offer := lost("bot-lost", 2, "5f1c0ffee0ddba11d00d5eed", at)
	offer.Warning = "the last good checkpoint 9e3b0d0c0ffee000 (taken 2026-11-29T11:30:00Z) cannot be read (repository damaged); the offer names the newest earlier checkpoint that can"
	offer.Candidates = []recovery.Candidate{
		{Checkpoint: "9e3b0d0c0ffee000aa", Time: at.Add(30 * time.Minute), LastGood: true, Problem: "checkpoint 9e3b0d0c0ffee000: repository damaged"},
		{Checkpoint: "5f1c0ffee0ddba11d00d5eed", Time: at, Readable: true},
	}
	e.rec.set(st, offer)

	// bot-held: lost again after a failed operation that left a repair
	// hold; its offer names the checkpoint to approve again.
	failedAt := time.Date(2026, 11, 29, 12, 5, 0, 0, time.UTC)
	op := recovery.Operation{ID: "op-7", Workspace: "bot-held", Checkpoint: "77aa0d0c0ffee000", State: recovery.OpFailed, Replacement: "ws-5e1d",
		Error:   "copy-back failed; repair hold hold-3 keeps the replacement: no space left on device",
		Action:  "an operator resolves repair hold hold-3: check the kept replacement ws-5e1d, then resolve the hold as destroyed, repaired or kept",
		Created: failedAt, Updated: failedAt}
	hold := recovery.Hold{ID: "hold-3", Workspace: "bot-held", Operation: "op-7", Provider: "local", Checkpoint: "77aa0d0c0ffee000",
		Lost: "inst-bot-held", Replacement: "ws-5e1d", Error: "copy-back failed (after_write, 1 attempts): no space left on device",
		Source: "/var/lib/lifeboat/recovery/op-7", Created: failedAt,
		Stop: &recovery.StopReceipt{Time: failedAt, Stopped: true, Detail: "provider local stopped instance ws-5e1d"}}
	e.rec.mu.Lock()
	e.rec.ops[op.ID] = op
	e.rec.holds[hold.ID] = hold
	e.rec.procs["bot-ok"] = []recovery.LostProcess{{Index: 0, ProcessRecord: recovery.ProcessRecord{Command: []string{"npm", "run", "dev"},
		Dir: "/workspace/app", Started: at, Tail: "ready on http://localhost:3000\n"}, State: "lost"}}
	e.rec.mu.Unlock()
	_, heldOffer := lost("bot-held", 1, "77aa0d0c0ffee000", failedAt.Add(-time.Hour))
	e.rec.set(recovery.WorkspaceState{Workspace: "bot-held", Instance: "inst-bot-held", Generation: 1, Operation: &op, Holds: []recovery.Hold{hold},
		Health: &recovery.Health{State: recovery.HealthLost, Instance: "inst-bot-held", Since: failedAt,
			Action: "the last good checkpoint is unchanged; fix the cause and approve recovery again"}}, heldOffer)
}

// TestStatusPageChromium: in headless Chromium at a desktop and a narrow
// width, against the fake recovery backend, the page shows each
// workspace's state, the offer with its candidates and warning, a failed
// operation with what fixes it, a repair hold with its stop receipt and
// the operator's action, and lost processes; it fits the width and breaks
// no content security policy rule. The approve button approves the
// offered checkpoint (once, with an idempotency key) and the state the
// event stream then pushes replaces the offer; the restart button
// restarts the lost process once.
func TestStatusPageChromium(t *testing.T) {
	bin := chromiumtest.Binary(t)
	golden := chromiumtest.Golden{Dir: filepath.Join("testdata", "screenshots"), Update: *update}
	for _, vp := range []struct {
		name          string
		width, height int
		mobile        bool
	}{{"desktop", 1280, 800, false}, {"narrow", 375, 740, true}} {
		t.Run(vp.name, func(t *testing.T) {
			e := newEnv(t)
			pageStates(e)

			c := chromiumtest.Start(t, bin)
			c.Viewport(vp.width, vp.height, vp.mobile)
			c.WatchCSP()
			c.Navigate(e.http.URL + "/#token=" + userToken)
			c.WaitFor(`document.body.dataset.loaded === "true" && document.getElementById("live").textContent === "live"`)

			var view struct {
				States       map[string]string
				Button       string
				ScrollWidth  int
				InnerWidth   int
				ButtonRight  float64
				ButtonHeight float64
				Hash         string
			}
			c.Eval(`(() => {
				const states = {};
				for (const a of document.querySelectorAll("article.ws")) states[a.id] = a.dataset.state;
				const b = document.querySelector("#ws-bot-lost button.approve");
				const r = b ? b.getBoundingClientRect() : {right: 0, height: 0};
				return { States: states, Button: b ? b.dataset.checkpoint : "", ScrollWidth: document.documentElement.scrollWidth,
					InnerWidth: window.innerWidth, ButtonRight: r.right, ButtonHeight: r.height, Hash: location.hash };
			})()`, &view)
			if view.States["ws-bot-lost"] != StateLost || view.States["ws-bot-held"] != StateFailed || view.States["ws-bot-ok"] != StateHealthy ||
				view.Button != "5f1c0ffee0ddba11d00d5eed" {
				t.Fatalf("page: %+v", view)
			}
			if view.ScrollWidth > view.InnerWidth || view.ButtonRight > float64(view.InnerWidth) || view.ButtonHeight < 24 {
				t.Fatalf("the page does not fit %d px: %+v", vp.width, view)
			}
			if view.Hash != "" {
				t.Fatalf("the token stayed in the URL: %q", view.Hash)
			}
			c.TextHas("ws-bot-lost", "Recovery offer", "5f1c0ffee0ddba11", "included", "running processes", "npm run dev",
				"cannot be read", "9e3b0d0c0ffe", "not readable", "repository damaged", "last good", "readable", "offered", "Check now")
			c.TextHas("ws-bot-held", "Recovery failed", "op-7", "no space left on device", "What fixes it", "an operator resolves repair hold hold-3",
				"Repair holds", "hold-3", "Kept replacement", "ws-5e1d", "local", "stopped", "provider local stopped instance ws-5e1d",
				"lifeboat recovery resolve hold-3")
			c.TextHas("ws-bot-ok", "Processes the last recovery lost", "npm run dev", "/workspace/app", "ready on http://localhost:3000", "lost", "Restart npm")
			chromiumtest.FitsWidth(t, c)
			golden.Check(t, "status-"+vp.name+".png", c.Screenshot(true), vp.width)

			// Approve: twice (a double click), one operation.
			c.Eval(`(() => { const b = document.querySelector("#ws-bot-lost button.approve"); b.click(); b.click(); return true; })()`, nil)
			c.WaitFor(`document.getElementById("ws-bot-lost").dataset.state === "recovering"`)
			e.rec.mu.Lock()
			n, op := e.rec.approvals, e.rec.ops["op-1"]
			e.rec.mu.Unlock()
			if n != 1 || op.Checkpoint != "5f1c0ffee0ddba11d00d5eed" || op.IdempotencyKey == "" {
				t.Fatalf("approvals %d, operation %+v", n, op)
			}
			var hasButton bool
			c.Eval(`!!document.querySelector("#ws-bot-lost button.approve")`, &hasButton)
			if hasButton {
				t.Fatal("the approve button is still shown while recovering")
			}

			// Restart the lost process: twice (a double click), one run.
			c.Eval(`(() => { const b = document.querySelector("#ws-bot-ok button.restart"); b.click(); b.click(); return true; })()`, nil)
			c.WaitFor(`document.querySelector("#ws-bot-ok li.proc").dataset.state === "restarting" && !document.querySelector("#ws-bot-ok button.restart")`)
			e.rec.mu.Lock()
			runs, restarts := e.rec.runs[0], len(e.rec.restarts)
			e.rec.mu.Unlock()
			if runs != 1 || restarts != 1 {
				t.Fatalf("the lost process ran %d times, %d restart keys", runs, restarts)
			}
			if v := c.CSPViolations(); len(v) > 0 {
				t.Fatalf("content security policy violations: %v", v)
			}
		})
	}
}
