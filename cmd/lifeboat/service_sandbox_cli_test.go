package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/bench"
	"lifeboat/providers/e2b/e2btest"
	"lifeboat/providers/managedagents/matest"
	"lifeboat/recovery"
)

// TestRecoverE2BWorkspaceThroughServe: a real `lifeboat serve` with an
// e2b provider instance whose platform is the contract server
// (providers/e2b/e2btest, built from E2B's openapi.yml, envd.yaml and
// process.proto): a workspace in a sandbox is captured and parked through
// envd, the sandbox is killed (the control plane answers 404), the
// workspace is found lost, offered, and on approval recovered into a new
// sandbox with its files, modes, mtimes, hard links, fifo, symlinks and
// browser session. The offer says xattrs do not come back. The API key,
// given by environment variable, never reaches the server's log.
func TestRecoverE2BWorkspaceThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	const key = "e2b_0123456789abcdef0123456789abcdef"
	srv := e2btest.Start(t, key)
	s := newSvcEnv(t, "")
	s.addConfig(fmt.Sprintf(`
[providers.sbx]
type = "e2b"
api_key_env = "LIFEBOAT_TEST_E2B_KEY"
base_url = %q
sandbox_url = %q

[workspaces.bot1]
park_interval = "1ns"
`, srv.URL, srv.URL))
	s.checkConfig()

	srv.Add("sbx-orig")
	work := srv.WorkspaceDir("sbx-orig")
	fx := writeRecoverableTree(t, work, 11, 31)
	xattrs := unix.Setxattr(filepath.Join(work, "d0", "f3.txt"), "user.origin", []byte("agent run 17"), 0) == nil
	old := time.Date(2026, 10, 1, 12, 0, 0, 123456789, time.UTC)
	must(t, os.Chtimes(filepath.Join(work, "d0", "f4.txt"), old, old))

	s.start("LIFEBOAT_TEST_E2B_KEY=" + key)
	s.cliOK("workspace", "add", "bot1", "--provider", "sbx", "--instance", "sbx-orig")
	if rc := s.cliJSON("capture", "--workspace", "bot1"); rc["outcome"] != "captured" {
		t.Fatalf("capture through envd: %v\n%s", rc, s.stderr)
	}
	must(t, os.WriteFile(filepath.Join(work, "d2", "late.txt"), []byte("written before the park"), 0o640))
	good := s.parkCaptured("through envd")

	// Lost: E2B kills the sandbox (its control plane now answers 404).
	want := filepath.Join(t.TempDir(), "want")
	must(t, os.Rename(work, want))
	srv.Remove("sbx-orig")
	if st := s.cliJSON("workspace", "check", "bot1"); st["state"] != "lost" {
		t.Fatalf("check: %v", st)
	}
	o := s.cliJSON("recovery", "offer", "bot1")
	if o["checkpoint"] != good || o["profile"] != true {
		t.Fatalf("offer: %v", o)
	}
	var says []string
	for _, n := range o["not_recoverable"].([]any) {
		says = append(says, n.(string))
	}
	if xattrs && !strings.Contains(strings.Join(says, "\n"), "extended attributes") {
		t.Fatalf("the offer does not say that xattrs do not come back on e2b: %q", says)
	}
	op := s.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--wait")
	if op["step"] != "recovered" {
		t.Fatalf("recovery: %v\n%s", op, s.stderr)
	}
	newID := op["new_instance"].(string)
	if sb, ok := srv.Lookup(newID); !ok || sb.State != "running" {
		t.Fatalf("the replacement %s is not a running sandbox on the platform: %+v", newID, sb)
	}
	got := srv.WorkspaceDir(newID)
	if xattrs {
		// As the offer said: the attribute did not come back.
		if _, err := unix.Getxattr(filepath.Join(got, "d0", "f3.txt"), "user.origin", make([]byte, 64)); err == nil {
			t.Fatal("an xattr came back, but the e2b adapter claims none")
		}
		must(t, unix.Removexattr(filepath.Join(want, "d0", "f3.txt"), "user.origin"))
	}
	checkRecoveredTree(t, want, got, fx)
	if fi, err := os.Stat(filepath.Join(got, "d0", "f4.txt")); err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("mtime: %v %v, want %v", fi.ModTime(), err, old)
	}
	w := s.cliJSON("workspace", "show", "bot1")
	if w["instance"] != newID || w["generation"].(float64) != 1 || w["provider"] != "sbx" {
		t.Fatalf("workspace after the recovery: %v", w)
	}
	s.stopLogWithout(key, "the E2B API key")
}

// TestRestartManagedAgentsSessionThroughServe: a real `lifeboat serve`
// with a managed-agents provider instance whose platform is the contract
// server (providers/managedagents/matest, from DigitalOcean's Harness
// Runtime sessions reference). Restart without a native checkpoint is a
// clean refusal; each park takes a native checkpoint and refuses the
// portable capture, saying so (the adapter has no file access), and keeps
// only the newest; a delete the platform refuses is retried on the next
// park; `lifeboat restart` rolls the session back onto the newest
// checkpoint and records the new sandbox in the workspace's instance id.
func TestRestartManagedAgentsSessionThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	const token = "dop_v1_contract_token"
	srv := matest.Start(t, token)
	inst := srv.Add("sess_1", "v1")
	s := newSvcEnv(t, "")
	tokFile := filepath.Join(s.dir, "agents.token")
	must(t, os.WriteFile(tokFile, []byte(token+"\n"), 0o600))
	s.addConfig(fmt.Sprintf(`
[providers.agents]
type = "managed-agents"
token_file = %q
base_url = %q

[workspaces.bot1]
park_interval = "1ns"
`, tokFile, srv.URL))
	s.start("LIFEBOAT_LIFECYCLE_NATIVE_INTERVAL=1ns")
	s.cliOK("workspace", "add", "bot1", "--provider", "agents", "--instance", inst)
	if r := s.cli("restart", "bot1"); r.code != exitRefused || !strings.Contains(r.stderr, "no native checkpoint") {
		t.Fatalf("restart without a native checkpoint: %d %s", r.code, r.stderr)
	}
	if ss, _ := srv.Get("sess_1"); ss.SandboxID+"" == "" || "sess_1/"+ss.SandboxID != inst {
		t.Fatalf("the refused restart changed the session: %+v", ss)
	}
	park := func() map[string]any {
		t.Helper()
		r := s.cli("--json", "park", "bot1")
		lines := jsonLines(t, r.stdout)
		if len(lines) == 0 {
			t.Fatalf("park printed nothing: %d %s", r.code, r.stderr)
		}
		rc := lines[len(lines)-1]
		if rc["native"] == nil || rc["native"] == "" {
			t.Fatalf("park took no native checkpoint: %v\n%s", rc, r.stderr)
		}
		// No file access: the portable capture is refused, saying why, and
		// is not counted as a failure.
		if rc["outcome"] != "refused" || !strings.Contains(fmt.Sprint(rc["error"]), "no file access") || rc["attempt"] != nil {
			t.Fatalf("park's portable capture on a provider without files: %v", rc)
		}
		// Exit 1, not 21: the workspace is neither lost nor recovering.
		if r.code != exitFailure || strings.Contains(r.stderr, recovery.ErrRecovering.Error()) || !strings.Contains(r.stderr, "no file access") {
			t.Fatalf("park on a provider without files: exit %d, want %d\n%s", r.code, exitFailure, r.stderr)
		}
		return rc
	}
	checkpoints := func() []string {
		ss, _ := srv.Get("sess_1")
		var ids []string
		for id := range ss.Checkpoints {
			ids = append(ids, "sess_1/"+id)
		}
		return ids
	}
	first := park()["native"].(string)
	second := park()["native"].(string)
	if cps := checkpoints(); len(cps) != 1 || cps[0] != second || first == second {
		t.Fatalf("after two parks the platform holds %v; want only the newest %s", cps, second)
	}
	// The platform refuses deletes for a while: the old checkpoint stays
	// and is deleted by a later park.
	srv.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodDelete {
			return false
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"id":"service_unavailable","message":"try again"}`)
		return true
	})
	third := park()["native"].(string)
	if cps := checkpoints(); len(cps) != 2 {
		t.Fatalf("with deletes refused the platform holds %v; want %s and %s", cps, second, third)
	}
	srv.SetFault(nil)
	srv.Update("sess_1", func(ss *matest.Session) { ss.Data = "v2" })
	fourth := park()["native"].(string)
	if cps := checkpoints(); len(cps) != 1 || cps[0] != fourth {
		t.Fatalf("after the deletes came back the platform holds %v; want only %s", cps, fourth)
	}

	srv.Update("sess_1", func(ss *matest.Session) { ss.Data = "v3 (after the checkpoint)" })
	rr := s.cliJSON("restart", "bot1")
	ss, _ := srv.Get("sess_1")
	to := "sess_1/" + ss.SandboxID
	if rr["checkpoint"] != fourth || rr["from"] != inst || rr["to"] != to || to == inst || ss.Data != "v2" {
		t.Fatalf("restart: %v; session %+v", rr, ss)
	}
	w := s.cliJSON("workspace", "show", "bot1")
	if w["instance"] != to || w["generation"].(float64) != 1 {
		t.Fatalf("workspace after the restart: %v", w)
	}
	if st := s.cliJSON("workspace", "check", "bot1"); st["state"] == "lost" {
		t.Fatalf("check after the restart: %v", st)
	}
	s.stopLogWithout(token, "the API token")
}

// TestRestartE2BSandboxThroughServe: with the contract server as E2B, a
// capture takes a snapshot before the portable capture; `lifeboat
// restart` rolls the workspace back onto it: a new sandbox made from the
// snapshot (without what was written after), the old one killed, the new
// sandbox id recorded.
func TestRestartE2BSandboxThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	const key = "e2b_fedcba9876543210fedcba9876543210"
	srv := e2btest.Start(t, key)
	keyFile := filepath.Join(t.TempDir(), "e2b.key")
	must(t, os.WriteFile(keyFile, []byte(key+"\n"), 0o600))
	s := newSvcEnv(t, fmt.Sprintf(`
[providers.sbx]
type = "e2b"
api_key_file = %q
base_url = %q
sandbox_url = %q
`, keyFile, srv.URL, srv.URL))
	srv.Add("sbx-orig")
	work := srv.WorkspaceDir("sbx-orig")
	writeTree(t, work, 5)
	s.start()
	s.cliOK("workspace", "add", "bot1", "--provider", "sbx", "--instance", "sbx-orig")
	rc := s.cliJSON("capture", "--workspace", "bot1")
	if rc["outcome"] != "captured" || rc["native"] == nil {
		t.Fatalf("capture: %v", rc)
	}
	snap := rc["native"].(string)
	must(t, os.WriteFile(filepath.Join(work, "after.txt"), []byte("written after the snapshot"), 0o644))
	rr := s.cliJSON("restart", "bot1")
	to, _ := rr["to"].(string)
	if rr["checkpoint"] != snap || rr["from"] != "sbx-orig" || to == "" || to == "sbx-orig" {
		t.Fatalf("restart: %v", rr)
	}
	if _, ok := srv.Lookup("sbx-orig"); ok {
		t.Fatal("the old sandbox still runs after the restart")
	}
	d, err := bench.CompareSkip(work, srv.WorkspaceDir(to), func(rel string) bool { return rel == "after.txt" })
	if err != nil || len(d) > 0 {
		t.Fatalf("the new sandbox differs from the snapshot: %v %v", d, err)
	}
	if _, err := os.Lstat(filepath.Join(srv.WorkspaceDir(to), "after.txt")); err == nil {
		t.Fatal("a file written after the snapshot is in the rolled-back sandbox")
	}
	w := s.cliJSON("workspace", "show", "bot1")
	if w["instance"] != to || w["generation"].(float64) != 1 {
		t.Fatalf("workspace after the restart: %v", w)
	}
	if st := s.cliJSON("workspace", "check", "bot1"); st["state"] == "lost" {
		t.Fatalf("check after the restart: %v", st)
	}
	s.stop()
}

// TestProviderTestE2B: `lifeboat provider test` against the E2B contract
// server runs the whole story (create, files and a profile, a snapshot as
// native checkpoint, capture, destroy confirmed missing, recovery,
// rollback), removes every sandbox it made, and leaves a sandbox it did not
// make untouched.
func TestProviderTestE2B(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole recovery story")
	}
	const key = "e2b_00112233445566778899aabbccddeeff"
	srv := e2btest.Start(t, key)
	srv.Add("operators-own")
	opsWork := srv.WorkspaceDir("operators-own")
	must(t, os.MkdirAll(opsWork, 0o755))
	must(t, os.WriteFile(filepath.Join(opsWork, "keep.txt"), []byte("the operator's"), 0o600))
	t.Setenv("LB_TEST_E2B_KEY", key)
	s := newSvcEnv(t, fmt.Sprintf("\n[providers.sbx]\ntype = \"e2b\"\nbase_url = %q\nsandbox_url = %q\napi_key_env = \"LB_TEST_E2B_KEY\"\n", srv.URL, srv.URL))
	r := s.run("--config", s.cfgPath, "provider", "test", "sbx", "--json")
	if r.code != 0 {
		t.Fatalf("provider test sbx: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rep := jsonLines(t, r.stdout)[0]
	if rep["result"] != "passed" || rep["type"] != "e2b" {
		t.Fatalf("report: %v", rep)
	}
	wantChecksPassed(t, rep, allChecks...)
	if ids := srv.IDs(); len(ids) != 1 || ids[0] != "operators-own" {
		t.Fatalf("sandboxes left on the platform: %v (report %v)", ids, rep)
	}
	if snaps := srv.Snapshots(); len(snaps) != 0 {
		t.Fatalf("snapshots left on the platform: %v (report %v)", snaps, rep)
	}
	if b, err := os.ReadFile(filepath.Join(opsWork, "keep.txt")); err != nil || string(b) != "the operator's" {
		t.Fatalf("the operator's sandbox was touched: %q %v", b, err)
	}
	if strings.Contains(r.stdout+r.stderr, key) {
		t.Fatal("the report holds the API key")
	}
}
