package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// cdp drives headless Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: we write NUL-terminated JSON to its fd 3 and
// read from its fd 4), attached to one page.
type cdp struct {
	t       *testing.T
	cmd     *exec.Cmd
	w       *os.File
	mu      sync.Mutex
	next    int
	waiting map[int]chan cdpReply
	session string
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startChromium starts a headless Chromium with one blank page.
func startChromium(t *testing.T, bin string) *cdp {
	t.Helper()
	toR, toW, err := os.Pipe()
	must(t, err)
	fromR, fromW, err := os.Pipe()
	must(t, err)
	args := []string{"--headless", "--remote-debugging-pipe", "--user-data-dir=" + t.TempDir(), "--no-first-run",
		"--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", "--font-render-hinting=none"}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox") // Chromium refuses to run as root with its sandbox
	}
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{toR, fromW}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	toR.Close()
	fromW.Close()
	c := &cdp{t: t, cmd: cmd, w: toW, waiting: map[int]chan cdpReply{}}
	go c.read(fromR)
	t.Cleanup(func() {
		c.w.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", stderr.String())
		}
	})
	var target struct{ TargetID string }
	c.call("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct{ SessionID string }
	c.call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	c.session = att.SessionID
	return c
}

func (c *cdp) read(r *os.File) {
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			c.mu.Lock()
			for id, ch := range c.waiting {
				close(ch)
				delete(c.waiting, id)
			}
			c.mu.Unlock()
			return
		}
		var m struct {
			ID int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // an event
		}
		c.mu.Lock()
		ch := c.waiting[m.ID]
		delete(c.waiting, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call sends one command (to the page once attached) and decodes its result.
func (c *cdp) call(method string, params any, out any) {
	c.t.Helper()
	c.mu.Lock()
	c.next++
	id := c.next
	ch := make(chan cdpReply, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if c.session != "" {
		msg["sessionId"] = c.session
	}
	b, err := json.Marshal(msg)
	must(c.t, err)
	if _, err := c.w.Write(append(b, 0)); err != nil {
		c.t.Fatalf("chromium %s: %v", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			c.t.Fatalf("chromium %s: the browser went away", method)
		}
		if r.Error != nil {
			c.t.Fatalf("chromium %s: %s", method, r.Error.Message)
		}
		if out != nil {
			must(c.t, json.Unmarshal(r.Result, out))
		}
	case <-time.After(time.Minute):
		c.t.Fatalf("chromium %s: no answer within a minute", method)
	}
}

// eval evaluates a JS expression (awaiting a promise) and decodes its value.
func (c *cdp) eval(expr string, out any) {
	c.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	c.call("Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &r)
	if r.ExceptionDetails != nil {
		c.t.Fatalf("evaluating %s: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if out != nil {
		must(c.t, json.Unmarshal(r.Result.Value, out))
	}
}

// waitFor waits until the expression is truthy, checking it in the page
// after every DOM change (a MutationObserver, no polling); 30 s at most.
func (c *cdp) waitFor(expr string) {
	c.t.Helper()
	var ok bool
	c.eval(fmt.Sprintf(`new Promise((resolve) => {
		const test = () => { try { return !!(%s); } catch (e) { return false; } };
		if (test()) return resolve(true);
		const obs = new MutationObserver(() => { if (test()) { obs.disconnect(); resolve(true); } });
		obs.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
		setTimeout(() => { obs.disconnect(); resolve(test()); }, 30000);
	})`, expr), &ok)
	if !ok {
		var html string
		c.eval("document.body.outerHTML", &html)
		c.t.Fatalf("the page did not reach %s within 30 s:\n%s", expr, html)
	}
}
