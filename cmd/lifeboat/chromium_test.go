package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromiumDumpDOM runs headless Chromium on the profile udd, loads url,
// prints the DOM once the page has loaded, and exits cleanly (the normal
// shutdown that writes cookies and localStorage to disk).
func chromiumDumpDOM(t *testing.T, bin, udd, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--headless", "--password-store=basic", "--user-data-dir=" + udd, "--no-first-run",
		"--disable-gpu", "--disable-dev-shm-usage", "--dump-dom", url}
	if os.Geteuid() == 0 {
		args = append([]string{"--no-sandbox"}, args...) // Chromium refuses to run as root with its sandbox
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	return string(out)
}

// TestRealChromiumRoundTrip: a real Chromium sets a cookie and a
// localStorage value from a local page and shuts down; the profile is
// captured, the original deleted, the snapshot restored with --profiles
// into a fresh directory, and Chromium started on the restored profile
// reads both values back.
func TestRealChromiumRoundTrip(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("skipped: Debian's chromium is not installed here (`apt-get install chromium`; .ci/run installs it)")
	}
	if testing.Short() {
		t.Skip("skipped in -short mode: starts a real browser twice")
	}
	stamp := fmt.Sprintf("%x", time.Now().UnixNano())
	cookie, stored := "lbc-"+stamp, "lbs-"+stamp
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/set":
			http.SetCookie(w, &http.Cookie{Name: "lb", Value: cookie, Path: "/", MaxAge: 3600})
			fmt.Fprintf(w, "<html><body><script>localStorage.setItem('lb', %q); document.body.textContent = 'set';</script></body></html>", stored)
		case "/get":
			fmt.Fprint(w, "<html><body><script>document.body.textContent = 'C=' + document.cookie + ' L=' + localStorage.getItem('lb');</script></body></html>")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	e := newEnv(t)
	e.init()
	ws := filepath.Join(e.dir, "ws")
	udd := filepath.Join(ws, "home", ".config", "chromium")
	must(t, os.MkdirAll(udd, 0o700))
	must(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("workspace file"), 0o600))
	if out := chromiumDumpDOM(t, bin, udd, srv.URL+"/set"); !strings.Contains(out, ">set<") {
		t.Fatalf("the page did not run: %s", out)
	}
	sum := e.capture("w", ws)
	if p := sum["profiles"].([]any); len(p) != 1 || p[0].(map[string]any)["path"] != "home/.config/chromium" {
		t.Fatalf("the Chromium profile was not captured as a profile: %v", sum)
	}
	must(t, os.RemoveAll(ws))
	target := filepath.Join(e.dir, "restored")
	e.ok("restore", "--profiles", "--workspace", "w", "--target", target, "latest")
	rudd := filepath.Join(target, "home", ".config", "chromium")
	out := chromiumDumpDOM(t, bin, rudd, srv.URL+"/get")
	if !strings.Contains(out, "C=lb="+cookie) || !strings.Contains(out, "L="+stored) {
		t.Fatalf("the restored profile lost the session: %s", out)
	}
}
