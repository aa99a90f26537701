package chromiumtest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Browser is one headless Chromium attached to one page, driven over the
// DevTools protocol on a pipe (--remote-debugging-pipe: NUL-terminated
// JSON written to its fd 3 and read from its fd 4).
type Browser struct {
	t       testing.TB
	w       *os.File
	mu      sync.Mutex
	next    int
	waiting map[int]chan reply
	subs    map[string][]chan json.RawMessage
	session string
	// Timeout bounds each protocol call and each WaitFor (default 60 s).
	Timeout time.Duration
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Binary returns the path of Debian's chromium, or skips the test when it
// is not installed or in -short mode.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("skipped: Debian's chromium is not installed here (`apt-get install chromium`; .ci/run installs it)")
	}
	if testing.Short() {
		t.Skip("skipped in -short mode: starts a real browser")
	}
	return bin
}

// Start starts a headless Chromium with one blank page and attaches to
// it; the test's cleanup kills it (and logs its stderr when the test
// failed).
func Start(t testing.TB, bin string) *Browser {
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
	// Killed at the end, it cannot remove its singleton socket's
	// directory: that goes in the test's temp dir, not /tmp.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	cmd.ExtraFiles = []*os.File{toR, fromW}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	toR.Close()
	fromW.Close()
	b := &Browser{t: t, w: toW, waiting: map[int]chan reply{}, subs: map[string][]chan json.RawMessage{}, Timeout: time.Minute}
	done := make(chan struct{})
	go func() { b.read(fromR); close(done) }()
	t.Cleanup(func() {
		b.w.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		fromR.Close() // ends the reader even if a child of the browser still holds the pipe
		<-done
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", stderr.String())
		}
	})
	var target struct{ TargetID string }
	b.Call("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct{ SessionID string }
	b.Call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	return b
}

// read delivers replies to their callers and events to their subscribers
// until the browser goes away.
func (b *Browser) read(r *os.File) {
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			for m, chs := range b.subs {
				for _, ch := range chs {
					close(ch)
				}
				delete(b.subs, m)
			}
			b.mu.Unlock()
			return
		}
		var m struct {
			ID     int             `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			reply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID == 0 {
			for _, ch := range b.subs[m.Method] {
				select {
				case ch <- m.Params:
				default: // a subscriber that does not keep up loses events; Subscribe says so
				}
			}
			b.mu.Unlock()
			continue
		}
		ch := b.waiting[m.ID]
		delete(b.waiting, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.reply
		}
	}
}

// Subscribe returns the params of every later event named method (such as
// "Fetch.requestPaused"), up to 256 not yet read; cancel ends it.
func (b *Browser) Subscribe(method string) (events <-chan json.RawMessage, cancel func()) {
	ch := make(chan json.RawMessage, 256)
	b.mu.Lock()
	b.subs[method] = append(b.subs[method], ch)
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, c := range b.subs[method] {
			if c == ch {
				b.subs[method] = append(b.subs[method][:i], b.subs[method][i+1:]...)
				close(ch)
				return
			}
		}
	}
}

// Call sends one command (to the page once attached) and decodes its
// result into out (when not nil); an error answer fails the test.
func (b *Browser) Call(method string, params any, out any) {
	b.t.Helper()
	if err := b.TryCall(method, params, out); err != nil {
		b.t.Fatal(err)
	}
}

// TryCall is Call that returns the browser's error answer instead.
func (b *Browser) TryCall(method string, params any, out any) error {
	b.t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan reply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if b.session != "" {
		msg["sessionId"] = b.session
	}
	data, err := json.Marshal(msg)
	must(b.t, err)
	if _, err := b.w.Write(append(data, 0)); err != nil {
		b.t.Fatalf("chromium %s: %v", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			b.t.Fatalf("chromium %s: the browser went away", method)
		}
		if r.Error != nil {
			return &ProtocolError{Method: method, Message: r.Error.Message}
		}
		if out != nil {
			must(b.t, json.Unmarshal(r.Result, out))
		}
		return nil
	case <-time.After(b.Timeout):
		b.t.Fatalf("chromium %s: no answer within %v", method, b.Timeout)
		return nil
	}
}

// ProtocolError is the browser's error answer to a command.
type ProtocolError struct{ Method, Message string }

func (e *ProtocolError) Error() string { return "chromium " + e.Method + ": " + e.Message }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
