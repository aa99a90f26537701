package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestServeBoundsScheduledChecks: `[lifecycle] max_checks` reaches the
// lifecycle through `serve`. Five workspaces on sandboxes of an HTTP
// platform are added with a check interval of 10 ms; the server then
// starts again with max_checks = 2, and its first round finds all five
// due. The platform holds every inspection (GET
// /sandbox/{id}) until two are held, then lets one go: the round must
// inspect every sandbox, never more than two at once.
func TestServeBoundsScheduledChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	const secret, checks, workspaces = "platform-secret-4711", 2, 5
	sb := platformtest.New(t, secret)
	srv := platformtest.Serve(t, sb.Daytona())
	s := newSvcEnv(t, fmt.Sprintf("\n[providers.box1]\ntype = \"daytona\"\nbase_url = %q\napi_key_env = \"LB_TEST_PLATFORM_KEY\"\n", srv.URL))
	key := "LB_TEST_PLATFORM_KEY=" + secret
	interval := "LIFEBOAT_LIFECYCLE_CHECK_INTERVAL=10ms"
	s.start(key, interval)
	for i := range workspaces {
		box, err := sb.Add("", "started", nil)
		must(t, err)
		s.cliOK("workspace", "add", fmt.Sprintf("bot%d", i), "--provider", "box1", "--instance", box.ID)
	}
	s.stop()

	g := &inspectGate{arrived: make(chan string, 4*workspaces), release: make(chan struct{}), open: make(chan struct{})}
	sb.SetFault(g.hold)
	defer g.openUp()
	s.start(key, interval, fmt.Sprintf("LIFEBOAT_LIFECYCLE_MAX_CHECKS=%d", checks))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen, held := map[string]bool{}, 0
	for len(seen) < workspaces {
		select {
		case id := <-g.arrived:
			seen[id] = true
			if held++; held == checks {
				g.release <- struct{}{}
				held--
			}
		case <-ctx.Done():
			t.Fatalf("the first scheduled round inspected %d of %d sandboxes (%d held) and no more came\n%s", len(seen), workspaces, held, s.stderr)
		}
	}
	if most := g.openUp(); most != checks {
		t.Fatalf("%d inspections at once with max_checks = %d", most, checks)
	}
	s.stop()
}

// inspectGate is a platform fault that holds each sandbox inspection
// until the test lets one go (release) or opens the gate, and records the
// most inspections held at once.
type inspectGate struct {
	mu           sync.Mutex
	inside, most int
	arrived      chan string   // the sandbox of each inspection held
	release      chan struct{} // lets one held inspection go
	open         chan struct{} // closed: nothing more is held
	opened       sync.Once
}

func (g *inspectGate) hold(_ http.ResponseWriter, r *http.Request) bool {
	id, ok := strings.CutPrefix(r.URL.Path, "/sandbox/")
	if r.Method != http.MethodGet || !ok || strings.Contains(id, "/") {
		return false
	}
	select {
	case <-g.open:
		return false
	default:
	}
	g.mu.Lock()
	g.inside++
	g.most = max(g.most, g.inside)
	g.mu.Unlock()
	select {
	case g.arrived <- id:
		select {
		case <-g.release:
		case <-g.open:
		case <-r.Context().Done():
		}
	case <-g.open:
	}
	g.mu.Lock()
	g.inside--
	g.mu.Unlock()
	return false // the platform answers
}

// openUp lets every inspection through from now on and returns the most
// held at once.
func (g *inspectGate) openUp() int {
	g.opened.Do(func() { close(g.open) })
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}
