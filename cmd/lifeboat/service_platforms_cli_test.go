package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/providers/platformtest"
)

// TestRecoverPlatformWorkspaceThroughServe: for each HTTP sandbox
// platform, a real `lifeboat serve` whose config names the platform (its
// type, the contract server's URL as base_url, the credential from an
// environment variable or a file) registers a workspace on a sandbox of
// the contract server, captures and parks it, sees it lost when the
// platform removes the sandbox (its control plane's confirmed not-found),
// offers, and on approval recovers into a new sandbox made through the
// platform's API. The new sandbox holds what was captured: files, modes
// (setuid, sticky), mtimes, hard links, a named pipe, symlinks and the
// browser session. On cloudflare, whose adapter has native checkpoints
// (directory backups), the first capture takes one and `lifeboat restart`
// rolls the sandbox back to it in place. The contract servers are
// providers/platformtest's,
// built from each platform's public API reference (see there).
func TestRecoverPlatformWorkspaceThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	for _, pc := range []struct {
		kind, workspace, state string
		handler                func(*platformtest.Sandboxes) http.Handler
		extra                  string // config keys beyond type, base_url and the credential
		byFile                 bool   // the credential from api_key_file, else api_key_env
		native                 bool   // the adapter takes native checkpoints at a park
	}{
		{kind: "vercel", workspace: "/vercel/sandbox/workspace", state: "running",
			handler: func(s *platformtest.Sandboxes) http.Handler { return s.Vercel("team_1") },
			extra:   "team_id = \"team_1\"\nproject_id = \"prj_1\"\n"},
		{kind: "daytona", workspace: "/home/daytona/workspace", state: "started", byFile: true,
			handler: func(s *platformtest.Sandboxes) http.Handler { return s.Daytona() }},
		{kind: "cloudflare", workspace: "/workspace", state: "running", native: true,
			handler: func(s *platformtest.Sandboxes) http.Handler { return s.Cloudflare() }},
	} {
		t.Run(pc.kind, func(t *testing.T) {
			const secret = "platform-secret-4711"
			sb := platformtest.New(t, secret)
			srv := platformtest.Serve(t, pc.handler(sb))
			s := newSvcEnv(t, "")
			cred, env := fmt.Sprintf("api_key_env = %q\n", "LB_TEST_PLATFORM_KEY"), []string{"LB_TEST_PLATFORM_KEY=" + secret}
			if pc.byFile {
				keyFile := filepath.Join(s.dir, "platform.key")
				must(t, os.WriteFile(keyFile, []byte(secret+"\n"), 0o600))
				cred, env = fmt.Sprintf("api_key_file = %q\n", keyFile), nil
			}
			s.addConfig(fmt.Sprintf("\n[providers.box1]\ntype = %q\nbase_url = %q\n%s%s\n[workspaces.bot1]\npark_interval = \"1ns\"\n",
				pc.kind, srv.URL, cred, pc.extra))
			s.checkConfig()
			if r := s.run("--config", s.cfgPath, "config", "show"); strings.Contains(r.stdout+r.stderr, secret) {
				t.Fatalf("config show prints the credential:\n%s", r.stdout)
			}

			// The sandbox on the platform: a tree with what a faithful recovery keeps.
			box, err := sb.Add("sbx-original", pc.state, nil)
			must(t, err)
			work, err := sb.HostPath(box.ID, pc.workspace)
			must(t, err)
			fx := writeRecoverableTree(t, work, 11, 29)

			s.start(env...)
			s.cliOK("workspace", "add", "bot1", "--provider", "box1", "--instance", box.ID)
			rc := s.cliJSON("capture", "--workspace", "bot1")
			if rc["outcome"] != "captured" {
				t.Fatalf("capture from %s: %v", pc.kind, rc)
			}
			must(t, os.WriteFile(filepath.Join(work, "d2", "late.txt"), []byte("written before the park"), 0o640))
			good := s.parkCaptured("on " + pc.kind)
			// The first capture takes a native checkpoint where the adapter
			// has them (the park comes within the native interval).
			if (rc["native"] != nil) != pc.native {
				t.Fatalf("capture's native checkpoint: %v, want one: %v", rc["native"], pc.native)
			}
			if pc.native {
				// Rollback restart to it: late.txt, written after it, goes;
				// the instance stays. The park captures the result again.
				r := s.cliJSON("restart", "bot1")
				if r["checkpoint"] != rc["native"] || r["to"] != box.ID {
					t.Fatalf("restart: %v", r)
				}
				if _, err := os.Lstat(filepath.Join(work, "d2", "late.txt")); !os.IsNotExist(err) {
					t.Fatalf("the restart kept a file written after the checkpoint: %v", err)
				}
				good = s.parkCaptured("after the restart")
			}

			// Lost: the platform removes the sandbox (kept aside to compare with).
			want := filepath.Join(t.TempDir(), "want")
			must(t, os.Rename(work, want))
			sb.Remove(box.ID)
			if st := s.cliJSON("workspace", "check", "bot1"); st["state"] != "lost" {
				t.Fatalf("check: %v", st)
			}
			o := s.cliJSON("recovery", "offer", "bot1")
			if o["checkpoint"] != good || o["profile"] != true {
				t.Fatalf("offer: %v", o)
			}
			t.Logf("offer says not recoverable: %v", o["not_recoverable"])
			op := s.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--wait")
			if op["step"] != "recovered" {
				t.Fatalf("recovery: %v\n%s", op, s.stderr)
			}
			newID := op["new_instance"].(string)
			if newID == box.ID {
				t.Fatalf("recovered into the lost sandbox's id %s", newID)
			}
			got, err := sb.HostPath(newID, pc.workspace)
			must(t, err)

			checkRecoveredTree(t, want, got, fx)
			w := s.cliJSON("workspace", "show", "bot1")
			gen := 1.0
			if pc.native {
				gen = 2 // the restart moved it on once
			}
			if w["instance"] != newID || w["generation"].(float64) != gen || w["provider"] != "box1" {
				t.Fatalf("workspace after the recovery: %v", w)
			}
			s.stop()
			if strings.Contains(s.stderr.String(), secret) {
				t.Fatalf("serve logged the credential:\n%s", s.stderr)
			}
		})
	}
}
