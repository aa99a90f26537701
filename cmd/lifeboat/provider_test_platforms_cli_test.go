package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/providers/platformtest"
)

// TestProviderTestPlatforms: `lifeboat provider test NAME` runs the live
// smoke test against a vercel, a daytona and a cloudflare instance whose
// platform is its contract server (providers/platformtest): every check
// passes (the native checkpoint and rollback only on cloudflare, whose
// adapter has them), everything the test made is destroyed, and the
// operator's own sandbox on the platform is left as it was.
func TestProviderTestPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole recovery story per platform")
	}
	for _, pc := range []struct {
		kind, workspace, state string
		handler                func(*platformtest.Sandboxes) http.Handler
		extra                  string
		native                 bool
	}{
		{kind: "vercel", workspace: "/vercel/sandbox/workspace", state: "running",
			handler: func(s *platformtest.Sandboxes) http.Handler { return s.Vercel("") }, extra: "project_id = \"prj_1\"\n"},
		{kind: "daytona", workspace: "/home/daytona/workspace", state: "started",
			handler: func(s *platformtest.Sandboxes) http.Handler { return s.Daytona() }},
		{kind: "cloudflare", workspace: "/workspace", state: "running", native: true,
			handler: func(s *platformtest.Sandboxes) http.Handler { return s.Cloudflare() }},
	} {
		t.Run(pc.kind, func(t *testing.T) {
			const secret = "platform-secret-0815"
			sb := platformtest.New(t, secret)
			srv := platformtest.Serve(t, pc.handler(sb))
			ops, err := sb.Add("operators-own", pc.state, nil)
			must(t, err)
			opsWork, err := sb.HostPath(ops.ID, pc.workspace)
			must(t, err)
			must(t, os.MkdirAll(opsWork, 0o755))
			must(t, os.WriteFile(filepath.Join(opsWork, "keep.txt"), []byte("the operator's"), 0o600))
			t.Setenv("LB_TEST_PLATFORM_KEY", secret)
			s := newSvcEnv(t, fmt.Sprintf("\n[providers.box1]\ntype = %q\nbase_url = %q\napi_key_env = \"LB_TEST_PLATFORM_KEY\"\n%s",
				pc.kind, srv.URL, pc.extra))

			r := s.run("--config", s.cfgPath, "provider", "test", "box1", "--json")
			if r.code != 0 {
				t.Fatalf("provider test box1: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			rep := jsonLines(t, r.stdout)[0]
			if rep["message_type"] != "provider_test" || rep["result"] != "passed" || rep["type"] != pc.kind || rep["snapshot"] == nil {
				t.Fatalf("report: %v", rep)
			}
			checks := wantChecksPassed(t, rep, "create", "write files and a browser profile", "portable capture",
				"destroy and confirm missing", "recover into a replacement")
			t.Logf("checks: %v", checks)
			if pc.native && (checks["native checkpoint"] != "passed" || checks["rollback to the native checkpoint"] != "passed") {
				t.Fatalf("native checkpoint checks: %v", checks)
			}
			destroyed := map[any]bool{}
			for _, d := range rep["destroyed"].([]any) {
				destroyed[d] = true
			}
			for _, c := range rep["created"].([]any) {
				if !destroyed[c] || rep["left"] != nil {
					t.Fatalf("not everything it made was removed (%v): %v", c, rep)
				}
			}
			// Vercel has no delete: a destroyed sandbox stays listed, stopped.
			for _, b := range sb.List(nil) {
				if b.ID != ops.ID && !(pc.kind == "vercel" && b.State == "stopped") {
					t.Fatalf("the test left sandbox %+v on the platform", b)
				}
			}
			if b, ok := sb.Get(ops.ID); !ok || b.State != pc.state {
				t.Fatalf("the operator's sandbox after the test: %+v", b)
			}
			if b, err := os.ReadFile(filepath.Join(opsWork, "keep.txt")); err != nil || string(b) != "the operator's" {
				t.Fatalf("the operator's sandbox was touched: %q %v", b, err)
			}
		})
	}
}
