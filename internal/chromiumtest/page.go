package chromiumtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Viewport emulates a device of width x height CSS pixels at scale 1
// (mobile: a phone's viewport and touch), in the en-US locale and the UTC
// time zone, so dates render the same on every machine.
func (b *Browser) Viewport(width, height int, mobile bool) {
	b.t.Helper()
	b.Call("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height,
		"deviceScaleFactor": 1, "mobile": mobile}, nil)
	b.Call("Emulation.setLocaleOverride", map[string]any{"locale": "en-US"}, nil)
	b.Call("Emulation.setTimezoneOverride", map[string]any{"timezoneId": "UTC"}, nil)
}

// Navigate loads url in the page and waits until its load event.
func (b *Browser) Navigate(url string) {
	b.t.Helper()
	b.Call("Page.enable", map[string]any{}, nil)
	loaded, cancel := b.Subscribe("Page.loadEventFired")
	defer cancel()
	var nav struct{ ErrorText string }
	b.Call("Page.navigate", map[string]any{"url": url}, &nav)
	if nav.ErrorText != "" {
		b.t.Fatalf("chromium: navigating to %s: %s", url, nav.ErrorText)
	}
	b.Wait(loaded, "the load event of "+url)
}

// Wait returns the next event of a subscription, failing the test after
// the browser's Timeout.
func (b *Browser) Wait(events <-chan json.RawMessage, what string) json.RawMessage {
	b.t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			b.t.Fatalf("chromium: the browser went away while waiting for %s", what)
		}
		return ev
	case <-time.After(b.Timeout):
		b.t.Fatalf("chromium: no %s within %v", what, b.Timeout)
		return nil
	}
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into out (when not nil); an exception fails the
// test.
func (b *Browser) Eval(expr string, out any) {
	b.t.Helper()
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
	b.Call("Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &r)
	if r.ExceptionDetails != nil {
		b.t.Fatalf("evaluating %s: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if out != nil {
		must(b.t, json.Unmarshal(r.Result.Value, out))
	}
}

// WaitFor waits until the expression is truthy, testing it in the page
// after every DOM change (a MutationObserver, no polling), for at most the
// browser's Timeout; then it fails the test with the page's DOM.
func (b *Browser) WaitFor(expr string) {
	b.t.Helper()
	ms := b.Timeout.Milliseconds() - 1000 // answered before Call's own deadline
	var ok bool
	b.Eval(fmt.Sprintf(`new Promise((resolve) => {
		const test = () => { try { return !!(%s); } catch (e) { return false; } };
		if (test()) return resolve(true);
		const obs = new MutationObserver(() => { if (test()) { obs.disconnect(); clearTimeout(timer); resolve(true); } });
		obs.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
		const timer = setTimeout(() => { obs.disconnect(); resolve(test()); }, %d);
	})`, expr, ms), &ok)
	if !ok {
		var html string
		b.Eval("document.body.outerHTML", &html)
		b.t.Fatalf("the page did not reach %s within %v:\n%s", expr, b.Timeout, html)
	}
}

// Click clicks the element the CSS selector finds first (failing the test
// when there is none or it is disabled).
func (b *Browser) Click(selector string) {
	b.t.Helper()
	sel, err := json.Marshal(selector)
	must(b.t, err)
	var res string
	b.Eval(fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return "missing"; if (e.disabled) return "disabled"; e.click(); return ""; })()`, sel), &res)
	if res != "" {
		b.t.Fatalf("click %s: the element is %s", selector, res)
	}
}

// TextHas checks that the element with the id shows each text (in its
// innerText), failing the test with the text it shows.
func (b *Browser) TextHas(id string, want ...string) {
	b.t.Helper()
	sel, err := json.Marshal(id)
	must(b.t, err)
	var text string
	b.Eval(fmt.Sprintf(`document.getElementById(%s).innerText`, sel), &text)
	for _, w := range want {
		if !strings.Contains(text, w) {
			b.t.Fatalf("the element %s lacks %q:\n%s", id, w, text)
		}
	}
}

// Screenshot returns a PNG of the viewport, or with full of the whole
// page (its full height at the viewport's width).
func (b *Browser) Screenshot(full bool) []byte {
	b.t.Helper()
	params := map[string]any{"format": "png", "captureBeyondViewport": false}
	if full {
		var m struct {
			CSSContentSize struct{ Width, Height float64 } `json:"cssContentSize"`
		}
		b.Call("Page.getLayoutMetrics", map[string]any{}, &m)
		var w int
		b.Eval("document.documentElement.clientWidth", &w)
		params["captureBeyondViewport"] = true
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": w, "height": math.Ceil(m.CSSContentSize.Height), "scale": 1}
	}
	var shot struct{ Data string }
	b.Call("Page.captureScreenshot", params, &shot)
	data, err := base64.StdEncoding.DecodeString(shot.Data)
	must(b.t, err)
	return data
}
