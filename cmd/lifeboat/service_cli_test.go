package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"lifeboat/bench"
	"lifeboat/server"
)

// TestServiceLifecycleThroughCLI: a real `lifeboat serve` started from a
// config file is driven by the CLI while it runs, as a host operator
// would: workspaces registered and changed (no "state store in use"),
// capture, park, rollback restart (and its clean refusal without a native
// checkpoint), a process registered with its output, the sandbox lost,
// checked at once, offered, approved and recovered, the lost process
// restarted exactly once per key, the workspace removed. The server
// derives the key once: its captures and restores do no key derivation.
func TestServiceLifecycleThroughCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, `
[workspaces.bot1]
park_interval = "10m"

[[quiesce.hook]]
name = "agent"
pause = ["sh", "-c", "echo paused >> hook.log"]
resume = ["sh", "-c", "echo resumed >> hook.log"]
timeout = "10s"
workspaces = ["bot2"]
`)
	if r := s.run("config", "check", s.cfgPath, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"ok":true,"errors":[]`) {
		t.Fatalf("config check: %d %s %s", r.code, r.stdout, r.stderr)
	}
	s.start()
	work := s.sandbox("bot1", 1)
	s.sandbox("bot2", 2)

	w := s.cliJSON("workspace", "add", "bot1", "--provider", "local", "--instance", "bot1")
	if w["id"] != "bot1" || w["settings"].(map[string]any)["park_interval"] != "10m0s" {
		t.Fatalf("add: %v", w)
	}
	s.cliOK("workspace", "add", "bot2", "--provider", "local", "--park-interval", "1m")
	// Changing a workspace through the server keeps its stored policy.
	s.ok("policy", "set", "--workspace", "bot2", "--keep-last", "3")
	if v := s.cliJSON("workspace", "set", "bot2", "--park-interval", "2m"); v["settings"].(map[string]any)["own_park_interval"] != "2m0s" {
		t.Fatalf("workspace set: %v", v)
	}
	if r := s.ok("policy", "show", "--workspace", "bot2"); !strings.Contains(r.stdout, "last 3") {
		t.Fatalf("the stored policy went with a workspace change: %s", r.stdout)
	}
	if r := s.cli("workspace", "add", "bot3", "--provider", "nowhere"); r.code != exitUsage || !strings.Contains(r.stderr, "unknown_provider") {
		t.Fatalf("add with an unknown provider: %d %s", r.code, r.stderr)
	}
	if r := s.cli("workspace", "add", "bot3", "--provider", "local"); r.code != exitUsage || !strings.Contains(r.stderr, "instance_missing") {
		t.Fatalf("add of a missing instance: %d %s", r.code, r.stderr)
	}
	if r := s.cli("workspace", "set", "bot2", "--park-interval", "0s"); r.code != exitUsage || !strings.Contains(r.stderr, "bad_request") {
		t.Fatalf("a park interval of 0 through the server: %d %s", r.code, r.stderr)
	}
	if r := s.cli("workspace", "add", "bot2", "--provider", "local", "--instance", "gone"); r.code != exitRefused || !strings.Contains(r.stderr, "workspace_exists") {
		t.Fatalf("add of a registered id naming a missing instance: %d %s", r.code, r.stderr)
	}
	if r := s.cli("restart", "bot2"); r.code != exitRefused || !strings.Contains(r.stderr, "no native checkpoint") {
		t.Fatalf("restart without a native checkpoint: %d %s", r.code, r.stderr)
	}
	// The quiesce hook runs in bot2's sandbox around its capture: the
	// capture sees it paused, and it is resumed afterwards.
	if rc := s.cliJSON("capture", "--workspace", "bot2"); rc["outcome"] != "captured" {
		t.Fatalf("capture of bot2: %v", rc)
	}
	if b, err := os.ReadFile(filepath.Join(s.root, "bot2", "hook.log")); err != nil || string(b) != "paused\nresumed\n" {
		t.Fatalf("hook log %q %v", b, err)
	}
	if r := s.ok("restore", "--workspace", "bot2", "--target", filepath.Join(s.dir, "bot2-restored"), "latest"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, "bot2-restored", "hook.log")); err != nil || string(b) != "paused\n" {
		t.Fatalf("the capture did not see the writer paused: %q %v", b, err)
	}

	// A registered process: its output tail goes with the next checkpoint.
	p := s.cliJSON("process", "register", "bot1", "--dir", "app", "--", "sh", "-c", "echo restarted >> restarted.txt; echo up and running")
	pid := p["id"].(string)
	s.stdinRun(strings.NewReader("npm warn: listening on :3000 with secret-4711\n"), "process", "output", "bot1", pid)

	rc := s.cliJSON("capture", "--workspace", "bot1")
	if rc["outcome"] != "captured" || rc["native"] == nil {
		t.Fatalf("capture: %v", rc)
	}
	good := rc["snapshot"].(string)
	if rc := s.cliJSON("park", "bot1"); rc["outcome"] != "throttled" {
		t.Fatalf("park inside its 10m interval: %v", rc)
	}
	// Rollback restart: changes after the native checkpoint are undone,
	// the id stays, the instance and generation move on.
	must(t, os.WriteFile(filepath.Join(work, "after.txt"), []byte("made after the checkpoint"), 0o644))
	rr := s.cliJSON("restart", "bot1")
	inst := rr["to"].(string)
	if rr["workspace"] != "bot1" || rr["generation"].(float64) != 1 || inst == "" {
		t.Fatalf("restart: %v", rr)
	}
	if _, err := os.Stat(filepath.Join(s.root, inst, "after.txt")); !os.IsNotExist(err) {
		t.Fatalf("rollback kept a file made after the checkpoint: %v", err)
	}
	// The text shows through the server what it shows without one: the
	// native checkpoint, and here the restart.
	if out := s.cliOK("workspace", "show", "bot1").stdout; !strings.Contains(out, "native      "+rc["native"].(string)) ||
		!strings.Contains(out, "restarted   ") || !strings.Contains(out, "(bot1 to "+inst+")") {
		t.Fatalf("workspace show after the restart:\n%s", out)
	}

	// Lost: the instance is removed; check now sees it at once.
	want := filepath.Join(s.dir, "want-bot1")
	must(t, os.Rename(filepath.Join(s.root, inst), want))
	st := s.cliJSON("workspace", "check", "bot1")
	if st["state"] != "lost" || st["detail"] == nil || st["detail"] == "" || st["checked_at"] == nil {
		t.Fatalf("check now: %v", st)
	}
	if out := s.cliOK("workspace", "check", "bot1").stdout; !strings.Contains(out, "  found: "+st["detail"].(string)) {
		t.Fatalf("check now in text does not say what it found:\n%s", out)
	}
	o := s.cliJSON("recovery", "offer", "bot1")
	if o["checkpoint"] != good || len(o["candidates"].([]any)) != 1 {
		t.Fatalf("offer: %v", o)
	}
	op := s.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--idempotency-key", "k-1", "--wait")
	if op["step"] != "recovered" {
		t.Fatalf("approve: %v", op)
	}
	again := s.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--idempotency-key", "k-1")
	if again["id"] != op["id"] {
		t.Fatalf("the same key started another operation: %v", again)
	}
	repl := op["new_instance"].(string)
	if d, err := bench.Compare(want, filepath.Join(s.root, repl)); err != nil || len(d) > 0 {
		t.Fatalf("replacement differs from the captured tree: %v %v", d, err)
	}
	ops := jsonLines(t, s.cliOK("recovery", "operations", "bot1", "--json").stdout)
	if len(ops) != 1 || ops[0]["id"] != op["id"] {
		t.Fatalf("operations: %v", ops)
	}

	// The process did not survive; its last output is shown; a restart
	// runs it once per key.
	lost := s.cliJSON("process", "list", "bot1", "--lost")
	if out := lost["last_output"].(string); lost["id"] != "0" || !strings.Contains(out, "listening on :3000 with [REDACTED]") || strings.Contains(out, "4711") || lost["state"] != "lost" {
		t.Fatalf("lost process: %v", lost)
	}
	// The recovery ended its registration: it no longer runs anywhere.
	if reg := s.cliOK("process", "list", "bot1").stdout; reg != "" {
		t.Fatalf("registered after the recovery:\n%s", reg)
	}
	for range 2 {
		pr := s.cliJSON("process", "restart", "bot1", "0", "--idempotency-key", "restart-1")
		if pr["state"] != "restarted" {
			t.Fatalf("process restart: %v", pr)
		}
	}
	if out := s.cliOK("process", "restart", "bot1", "0", "--idempotency-key", "restart-1").stdout; out != "process 0 of bot1: restarted (exit code 0)\n    output: up and running\n" {
		t.Fatalf("process restart prints %q", out)
	}
	// The lost process's listing keeps its restart: state, exit code, output.
	lost = s.cliJSON("process", "list", "bot1", "--lost")
	if r, ok := lost["restart"].(map[string]any); lost["state"] != "restarted" || !ok || r["exit_code"] != 0.0 || r["output"] != "up and running\n" || r["idempotency_key"] != "restart-1" {
		t.Fatalf("lost process after its restart: %v", lost)
	}
	b, err := os.ReadFile(filepath.Join(s.root, repl, "restarted.txt"))
	if err != nil || string(b) != "restarted\n" {
		t.Fatalf("the restarted command ran %q (%v), want once", b, err)
	}

	// The key was derived once, when the server opened the repository.
	m, err := s.client().Metrics(t.Context())
	must(t, err)
	if got := metric(t, m, "lifeboat_key_derivations_total"); got != 1 {
		t.Fatalf("key derivations %v, want 1\n%s", got, m)
	}
	if got := metric(t, m, `lifeboat_captures_total{outcome="captured",reason="manual"}`); got != 2 {
		t.Fatalf("captures: %v", got)
	}

	if r := s.cliOK("recovery", "holds"); r.stdout != "" || !strings.Contains(r.stderr, "no open repair holds") {
		t.Fatalf("recovery holds without any: %q %q", r.stdout, r.stderr)
	}
	rm := s.cliJSON("workspace", "remove", "bot2")
	if rm["workspace"] != "bot2" || rm["forgotten"].(float64) != 0 {
		t.Fatalf("remove: %v", rm)
	}
	if r := s.cli("workspace", "show", "bot2"); r.code != exitUsage || !strings.Contains(r.stderr, "unknown_workspace") {
		t.Fatalf("show after remove: %d %s", r.code, r.stderr)
	}
	s.stop()
	// Stopped: the state store is free again for direct use.
	if ws := s.showWorkspace([]string{"--state-dir", s.state}, "bot1"); string(ws.Instance) != repl || ws.Generation != 2 {
		t.Fatalf("bot1 after the recovery: %+v", ws)
	}
}

// metric returns the value of one sample line of Prometheus text.
func metric(t *testing.T, text, name string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` ([0-9.e+-]+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no sample %s", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	must(t, err)
	return v
}

// TestRetentionBesideServe: while a real serve runs, `lifeboat forget` and
// `lifeboat prune` in other processes work (serve holds no repository
// lock for its life) and never remove the lifecycle's last good
// checkpoint, even when a newer snapshot of the same workspace id comes
// from another path (the data-loss reproduction); serve's own forget and
// prune (POST /v1/prune, and its schedule) run beside its captures; the
// lost sandbox is then recovered from its last good checkpoint.
func TestRetentionBesideServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, `
[retention]
keep_last = 1

[prune]
every = "1s"
max_unused = "0%"
`)
	s.start()
	work := s.addLocalWorkspace("bot1", 1)
	var good string
	for i := range 3 {
		writeTree(t, work, uint64(10+i))
		rc := s.cliJSON("capture", "--workspace", "bot1")
		if rc["outcome"] != "captured" {
			t.Fatalf("capture %d: %v", i, rc)
		}
		good = rc["snapshot"].(string)
	}
	// The same workspace id captured from another path, by another
	// process, is newer than the last good checkpoint.
	other := filepath.Join(s.dir, "other")
	writeTree(t, other, 99)
	newer := s.capture("bot1", other)["snapshot"].(string)
	if newer == good {
		t.Fatal("the other path gave the same snapshot")
	}
	lines := jsonLines(t, s.ok("forget", "--keep-last", "1", "--json").stdout)
	if d := decisionLine(t, lines, good); d["keep"] != true || !strings.Contains(strings.Join(strs(d["reasons"]), " "), "held") {
		t.Fatalf("forget decided on the last good checkpoint: %v", d)
	}
	s.ok("prune", "--max-unused", "0%")
	s.ok("check", "--read-data")

	// serve captures after the other process's prune (its index is
	// synced under its lock), and its own forget and prune run.
	writeTree(t, work, 20)
	rc := s.cliJSON("capture", "--workspace", "bot1")
	if rc["outcome"] != "captured" {
		t.Fatalf("capture after an outside prune: %v", rc)
	}
	good = rc["snapshot"].(string)
	rep, err := s.client().Prune(t.Context())
	if err != nil || !strings.Contains(string(rep), `"prune"`) {
		t.Fatalf("POST /v1/prune: %s %v", rep, err)
	}
	// The schedule (every second) runs while captures go on: wait for two
	// of its runs on the event stream, capturing in between.
	ev := s.events(t)
	for runs := 0; runs < 2; {
		writeTree(t, work, uint64(30+runs))
		rc := s.cliJSON("capture", "--workspace", "bot1")
		if rc["outcome"] != "captured" {
			t.Fatalf("capture beside the prune schedule: %v", rc)
		}
		good = rc["snapshot"].(string)
		for m := range ev.until("maintenance", "receipt") {
			if m.Type == "maintenance" {
				if d := m.Data.(map[string]any); d["error"] != nil {
					t.Fatalf("scheduled run failed: %v", d)
				}
				runs++
			}
		}
	}
	s.ok("check", "--read-data")

	// Lost (its tree kept aside to compare) and recovered from the last
	// good checkpoint, not from the newer snapshot of the other path.
	want := filepath.Join(s.dir, "want-bot1")
	must(t, os.Rename(work, want))
	if st := s.cliJSON("workspace", "check", "bot1"); st["state"] != "lost" {
		t.Fatalf("check: %v", st)
	}
	op := s.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--wait")
	if op["step"] != "recovered" {
		t.Fatalf("recovery: %v", op)
	}
	if d, err := bench.Compare(want, filepath.Join(s.root, op["new_instance"].(string))); err != nil || len(d) > 0 {
		t.Fatalf("replacement differs: %v %v", d, err)
	}
	m, err := s.client().Metrics(t.Context())
	must(t, err)
	if metric(t, m, `lifeboat_prune_runs_total{outcome="ok"}`) < 3 || metric(t, m, `lifeboat_prune_runs_total{outcome="failed"}`) != 0 {
		t.Fatalf("prune runs:\n%s", m)
	}
	s.stop()
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestServeTLS: with tls_cert and tls_key, serve answers HTTPS only.
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, "")
	certFile, keyFile, pool := selfSigned(t, s.dir)
	cfg, err := os.ReadFile(s.cfgPath)
	must(t, err)
	cfg = []byte(strings.Replace(string(cfg), "[server]\n", fmt.Sprintf("[server]\ntls_cert = %q\ntls_key = %q\n", certFile, keyFile), 1))
	must(t, os.WriteFile(s.cfgPath, cfg, 0o600))
	s.checkConfig()
	s.start()
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("serving at %s", s.url)
	}
	c := s.client()
	c.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if _, err := c.Workspaces(t.Context()); err != nil {
		t.Fatalf("HTTPS request: %v", err)
	}
	plain := &server.Client{BaseURL: "http://" + strings.TrimPrefix(s.url, "https://"), Token: s.opTok}
	if _, err := plain.Workspaces(t.Context()); err == nil {
		t.Fatal("plain HTTP answered")
	}
	// The CLI checks the certificate against the system's roots, which do
	// not hold this one: it says so.
	if r := s.cli("workspace", "list"); r.code == 0 || !strings.Contains(r.stderr, "TLS certificate is not trusted on this host") {
		t.Fatalf("CLI against an untrusted certificate: exit %d: %s", r.code, r.stderr)
	}
	// A second server on the same address: exit 2, saying another
	// process listens there.
	if r := s.run("--config", s.cfgPath, "--set", "server.listen="+strings.TrimPrefix(s.url, "https://"), "--set", "state.dir="+t.TempDir(), "serve"); r.code != exitUsage || !strings.Contains(r.stderr, "another process listens there") {
		t.Fatalf("serve on a taken address: exit %d: %s", r.code, r.stderr)
	}
	s.stop()
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lifeboat test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile, pool
}

// TestConfigCheckNamesFileLineAndKey: `lifeboat config check` reports
// every problem of a bad file with its file, line and key, exits 2, and
// `config show` redacts the password it reads.
func TestConfigCheckNamesFileLineAndKey(t *testing.T) {
	e := newEnv(t)
	bad := filepath.Join(e.dir, "bad.toml")
	must(t, os.WriteFile(bad, []byte(`[repository]
location = "/srv/repo"
password = "hunter2"

[state]
dir = 7

[server]
tokens_file = "/nonexistent/tokens"

[providers.box1]
type = "ftp"
`), 0o600))
	r := e.run("config", "check", bad, "--json")
	if r.code != exitUsage {
		t.Fatalf("config check of a bad file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines := jsonLines(t, r.stdout)
	got := map[string]float64{}
	for _, e := range lines[0]["errors"].([]any) {
		m := e.(map[string]any)
		if m["file"] != bad {
			t.Fatalf("error without its file: %v", m)
		}
		got[m["key"].(string)] = m["line"].(float64)
	}
	for key, line := range map[string]float64{"repository.password": 3, "state.dir": 6, "server.tokens_file": 9, "providers.box1.type": 12} {
		if got[key] != line {
			t.Fatalf("%s: line %v, want %v (all: %v)", key, got[key], line, got)
		}
	}
	if r := e.run("config", "check", bad); !strings.Contains(r.stdout, bad+":3: repository.password:") {
		t.Fatalf("text form: %s", r.stdout)
	}
	s := newSvcEnv(t, "")
	show := s.run("--config", s.cfgPath, "config", "show")
	if show.code != 0 || !strings.Contains(show.stdout, "password_file") || strings.Contains(show.stdout, testPW) {
		t.Fatalf("config show: %d\n%s%s", show.code, show.stdout, show.stderr)
	}
}

// TestConfigCheckReadsSecretFiles: `lifeboat config check` also reads
// what serve reads at start: a token file with a bad line and an ssh
// key_file that is not a private key are problems named with their keys
// (exit 2), and their contents are never shown.
func TestConfigCheckReadsSecretFiles(t *testing.T) {
	e := newEnv(t)
	tokens := filepath.Join(e.dir, "tokens")
	must(t, os.WriteFile(tokens, []byte("operator sha256:"+strings.Repeat("ab", 32)+" ops\nadmin hunter2-token\n"), 0o600))
	key := filepath.Join(e.dir, "id_box1")
	must(t, os.WriteFile(key, []byte("not a key: sekrit-key-bytes\n"), 0o600))
	knownHosts := filepath.Join(e.dir, "known_hosts")
	must(t, os.WriteFile(knownHosts, nil, 0o600))
	pw := filepath.Join(e.dir, "pw")
	must(t, os.WriteFile(pw, []byte(testPW), 0o600))
	cfg := filepath.Join(e.dir, "lifeboat.toml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`[repository]
location = %q
password_file = %q

[state]
dir = %q

[server]
tokens_file = %q

[providers.box1]
type = "ssh"
host = "127.0.0.1"
user = "bot"
key_file = %q
known_hosts = %q
root = "/home/bot/work"
`, filepath.Join(e.dir, "repo"), pw, filepath.Join(e.dir, "state"), tokens, key, knownHosts)), 0o600))
	r := e.run("config", "check", cfg, "--json")
	if r.code != exitUsage {
		t.Fatalf("config check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := map[string]string{}
	for _, m := range jsonLines(t, r.stdout)[0]["errors"].([]any) {
		m := m.(map[string]any)
		got[m["key"].(string)] = m["message"].(string)
	}
	if msg := got["server.tokens_file"]; !strings.Contains(msg, tokens+" line 2") {
		t.Errorf("server.tokens_file: %q, want the file and line 2", msg)
	}
	if msg := got["providers.box1.key_file"]; !strings.Contains(msg, key) || !strings.Contains(msg, "not a usable private key") {
		t.Errorf("providers.box1.key_file: %q", msg)
	}
	if len(got) != 2 {
		t.Errorf("problems %v, want the two secret files'", got)
	}
	for _, secret := range []string{"hunter2", "sekrit"} {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Fatalf("config check shows a secret file's content %q:\n%s%s", secret, r.stdout, r.stderr)
		}
	}
	if r := e.run("config", "check", cfg); r.code != exitUsage || !strings.Contains(r.stdout, cfg+": providers.box1.key_file: ") {
		t.Fatalf("text form: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestServeJSONAuditLog: with [log] format json, serve logs JSON lines,
// one per request with method, path, status, role and who, never a token.
func TestServeJSONAuditLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, "\n[log]\nformat = \"json\"\n")
	s.start()
	s.addLocalWorkspace("bot1", 1)
	s.stop()
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
		if line == "lifeboat serve: stopped" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if m["msg"] == "request" && m["method"] == "POST" && m["path"] == "/v1/workspaces" && m["status"].(float64) == 201 &&
			m["role"] == "operator" && m["who"] == "cli" {
			found = true
		}
		if strings.Contains(line, s.opTok) || strings.Contains(line, s.userTok) {
			t.Fatalf("a token in the log: %s", line)
		}
	}
	if !found {
		t.Fatalf("no audit line for the registration:\n%s", s.stderr)
	}
}

// TestServePeriodicRoundsFindEveryChange: `serve`'s periodic rounds over
// a local workspace (its interval set to a second through the CLI) find
// it unchanged until its files change, and every round that starts after
// a change captures it: a write, a mode, a new file in a new directory, a
// deletion, a rename. The server watches the files between listings: an
// unchanged round's receipt says it did not list them.
func TestServePeriodicRoundsFindEveryChange(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, "")
	s.start("LIFEBOAT_LIFECYCLE_PERIODIC_INTERVAL=24h", "LIFEBOAT_LIFECYCLE_NATIVE_INTERVAL=24h")
	work := s.addLocalWorkspace("bot1", 1)
	ev := s.events(t)
	s.cliOK("workspace", "set", "bot1", "--periodic-interval", "1s")
	// round returns the next periodic receipt of bot1 that started at or
	// after since.
	round := func(since time.Time) map[string]any {
		t.Helper()
		var got map[string]any
		for m := range ev.until() {
			d, ok := m.Data.(map[string]any)
			if m.Type != "receipt" || !ok || d["reason"] != "periodic" || d["workspace"] != "bot1" {
				continue
			}
			started, err := time.Parse(time.RFC3339Nano, d["started"].(string))
			must(t, err)
			if !started.Before(since) {
				got = d
				break
			}
		}
		return got
	}
	last := round(time.Time{})
	if last["outcome"] != "captured" {
		t.Fatalf("first periodic round: %v", last)
	}
	done := func(r map[string]any) time.Time {
		f, err := time.Parse(time.RFC3339Nano, r["finished"].(string))
		must(t, err)
		return f
	}
	// Rounds over the unchanged, watched workspace decide without listing
	// its files (their receipts have no "listed").
	for range 2 {
		if last = round(done(last)); last["outcome"] != "unchanged" || last["listed"] != nil {
			t.Fatalf("periodic round over the unchanged workspace: %v", last)
		}
	}
	changes := []struct {
		name   string
		change func()
	}{
		{"write", func() {
			f, err := os.OpenFile(filepath.Join(work, "d1", "f1.txt"), os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			_, err = f.WriteString("appended")
			must(t, err)
			must(t, f.Close())
		}},
		{"mode", func() { must(t, os.Chmod(filepath.Join(work, "d2", "f2.txt"), 0o600)) }},
		{"new file in a new directory", func() {
			must(t, os.MkdirAll(filepath.Join(work, "new", "deeper"), 0o755))
			must(t, os.WriteFile(filepath.Join(work, "new", "deeper", "n.txt"), []byte("new"), 0o644))
		}},
		{"deletion", func() { must(t, os.Remove(filepath.Join(work, "new", "deeper", "n.txt"))) }},
		{"rename", func() { must(t, os.Rename(filepath.Join(work, "d3"), filepath.Join(work, "new", "d3"))) }},
	}
	for _, c := range changes {
		c.change()
		// A round that started during the change may have missed part
		// of it; every round that starts after it must capture.
		at := time.Now()
		if last = round(at); last["outcome"] != "captured" {
			t.Fatalf("the first periodic round after a %s: %v", c.name, last)
		}
		if last = round(done(last)); last["outcome"] != "unchanged" || last["listed"] != nil {
			t.Fatalf("the periodic round after the capture of a %s: %v", c.name, last)
		}
	}
	s.stop()
}
