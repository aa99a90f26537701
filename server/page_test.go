package server

import (
	"bytes"
	"encoding/base64"
	"flag"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the status page screenshots in testdata/screenshots when they changed")

// TestStatusPageServed: the page and its assets need no token, hold no
// data, and are served with a restrictive content security policy.
func TestStatusPageServed(t *testing.T) {
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

// TestStatusPageChromium: in headless Chromium at a desktop and a narrow
// width, the page shows each workspace's state and the offer, fits the
// width, and its approve button approves the offered checkpoint (once,
// with an idempotency key); the state the event stream then pushes
// replaces the offer.
func TestStatusPageChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("skipped: Debian's chromium is not installed here (`apt-get install chromium`)")
	}
	if testing.Short() {
		t.Skip("skipped in -short mode: starts a real browser")
	}
	for _, vp := range []struct {
		name          string
		width, height int
		mobile        bool
	}{{"desktop", 1280, 800, false}, {"narrow", 375, 740, true}} {
		t.Run(vp.name, func(t *testing.T) {
			e := newEnv(t)
			e.workspace("bot-lost", map[string]string{"a.txt": "a"})
			e.workspace("bot-ok", map[string]string{"b.txt": "b"})
			at := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
			e.rec.set(lostState("bot-lost", 2, "5f1c0ffee0ddba11d00d5eed", at))

			c := startChromium(t, bin)
			c.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": vp.width, "height": vp.height,
				"deviceScaleFactor": 1, "mobile": vp.mobile}, nil)
			c.call("Page.navigate", map[string]any{"url": e.http.URL + "/#token=" + userToken}, nil)
			c.waitFor(`document.body.dataset.loaded === "true" && document.getElementById("live").textContent === "live"`)

			var view struct {
				States       map[string]string
				Button       string
				ScrollWidth  int
				InnerWidth   int
				ButtonRight  float64
				ButtonHeight float64
				Hash         string
			}
			c.eval(`(() => {
				const states = {};
				for (const a of document.querySelectorAll("article.ws")) states[a.id] = a.dataset.state;
				const b = document.querySelector("button.approve");
				const r = b ? b.getBoundingClientRect() : {right: 0, height: 0};
				return { States: states, Button: b ? b.dataset.checkpoint : "", ScrollWidth: document.documentElement.scrollWidth,
					InnerWidth: window.innerWidth, ButtonRight: r.right, ButtonHeight: r.height, Hash: location.hash };
			})()`, &view)
			if view.States["ws-bot-lost"] != StateLost || view.States["ws-bot-ok"] != StateHealthy || view.Button != "5f1c0ffee0ddba11d00d5eed" {
				t.Fatalf("page: %+v", view)
			}
			if view.ScrollWidth > view.InnerWidth || view.ButtonRight > float64(view.InnerWidth) || view.ButtonHeight < 24 {
				t.Fatalf("the page does not fit %d px: %+v", vp.width, view)
			}
			if view.Hash != "" {
				t.Fatalf("the token stayed in the URL: %q", view.Hash)
			}
			var text string
			c.eval(`document.getElementById("ws-bot-lost").innerText`, &text)
			for _, want := range []string{"Recovery offer", "5f1c0ffee0ddba11", "included", "running processes", "npm run dev"} {
				if !strings.Contains(text, want) {
					t.Fatalf("the lost workspace's card lacks %q:\n%s", want, text)
				}
			}
			screenshot(t, c, "status-"+vp.name+".png", vp.width)

			// Approve: twice (a double click), one operation.
			c.eval(`(() => { const b = document.querySelector("button.approve"); b.click(); b.click(); return true; })()`, nil)
			c.waitFor(`document.getElementById("ws-bot-lost").dataset.state === "recovering"`)
			e.rec.mu.Lock()
			n, op := e.rec.approvals, e.rec.ops["op-1"]
			e.rec.mu.Unlock()
			if n != 1 || op.Checkpoint != "5f1c0ffee0ddba11d00d5eed" || op.IdempotencyKey == "" {
				t.Fatalf("approvals %d, operation %+v", n, op)
			}
			var hasButton bool
			c.eval(`!!document.querySelector("button.approve")`, &hasButton)
			if hasButton {
				t.Fatal("the approve button is still shown while recovering")
			}
		})
	}
}

// screenshot captures the page; with -update it rewrites
// testdata/screenshots/name when the picture changed (pixel by pixel), else it goes to the
// test's temporary directory (LIFEBOAT_ARTIFACTS, when set, keeps it).
func screenshot(t *testing.T, c *cdp, name string, width int) {
	t.Helper()
	var shot struct{ Data string }
	c.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": false}, &shot)
	b, err := base64.StdEncoding.DecodeString(shot.Data)
	must(t, err)
	img, err := png.Decode(bytes.NewReader(b))
	must(t, err)
	if got := img.Bounds().Dx(); got != width {
		t.Fatalf("screenshot %s is %d px wide, want %d", name, got, width)
	}
	dir := t.TempDir()
	if d := os.Getenv("LIFEBOAT_ARTIFACTS"); d != "" {
		dir = d
	}
	if *update {
		dir = filepath.Join("testdata", "screenshots")
		if old, err := os.ReadFile(filepath.Join(dir, name)); err == nil && samePixels(old, img) {
			return // Chromium's PNG bytes vary from run to run; the picture is what counts
		}
	}
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	t.Logf("screenshot %s", filepath.Join(dir, name))
}

// samePixels reports whether the PNG old shows exactly img.
func samePixels(old []byte, img image.Image) bool {
	o, err := png.Decode(bytes.NewReader(old))
	if err != nil || o.Bounds() != img.Bounds() {
		return false
	}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r1, g1, b1, a1 := o.At(x, y).RGBA()
			r2, g2, b2, a2 := img.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
				return false
			}
		}
	}
	return true
}
