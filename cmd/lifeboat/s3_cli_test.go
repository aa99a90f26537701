package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/bench"
	"lifeboat/internal/s3test"
	"lifeboat/internal/storetest"
)

// TestS3RepositoryThroughBinary drives the built binary against a real S3
// server (versitygw) with credentials from AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY: init (which creates the bucket), capture,
// snapshots, restore, check --read-data; a second init is refused (15),
// wrong credentials are permission denied (22), a missing bucket is no
// repository (10) and a server that is down is unavailable (23).
func TestS3RepositoryThroughBinary(t *testing.T) {
	bin := lifeboatBinary(t)
	srv := s3test.Start(t)
	e := newEnv(t)
	loc := srv.Location("made-by-init", "team/repo")
	env := append(os.Environ(), srv.Env()...)
	lb := func(wantCode int, extraEnv []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--repo", loc, "--cache-dir", e.cache, "--password-file", e.passwdFile}, args...)...)
		cmd.Env = append(append([]string{}, env...), extraEnv...)
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			out = append(out, ee.Stderr...)
		} else if err != nil {
			t.Fatalf("lifeboat %v: %v", args, err)
		}
		if code != wantCode {
			t.Fatalf("lifeboat %v: exit %d, want %d\n%s", args, code, wantCode, out)
		}
		if strings.Contains(string(out), srv.SecretKey) {
			t.Fatalf("lifeboat %v printed the S3 secret key:\n%s", args, out)
		}
		return string(out)
	}
	lb(0, nil, "init", "--kdf-memory-kib", "64", "--kdf-time", "1")
	lb(exitRefused, nil, "init", "--kdf-memory-kib", "64", "--kdf-time", "1")
	src := filepath.Join(e.dir, "src")
	writeTree(t, src, 7)
	lb(0, nil, "capture", "--workspace", "w1", src)
	var snaps []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(lb(0, nil, "snapshots", "--json")), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("snapshots --json: %q: %v", l, err)
		}
		if m["message_type"] == "snapshot" {
			snaps = append(snaps, m)
		}
	}
	if len(snaps) != 1 {
		t.Fatalf("snapshots: %d, want 1", len(snaps))
	}
	target := filepath.Join(e.dir, "restored")
	lb(0, nil, "restore", "--workspace", "w1", "--target", target, "latest")
	if d, err := bench.Compare(src, target); err != nil || len(d) > 0 {
		t.Fatalf("restored tree differs: %v %v", d, err)
	}
	out := lb(0, nil, "check", "--read-data")
	if !strings.Contains(out, "no problems found") {
		t.Errorf("check --read-data:\n%s", out)
	}

	if out := lb(exitNoAccess, []string{"AWS_SECRET_ACCESS_KEY=not-the-secret"}, "snapshots"); !strings.Contains(out, "SignatureDoesNotMatch") {
		t.Errorf("wrong secret: %s", out)
	}
	loc = srv.Location("no-such-bucket", "")
	lb(exitNoRepo, nil, "snapshots")
	loc = "s3:http://127.0.0.1:1/bucket"
	lb(exitUnavailable, nil, "snapshots")
}

// TestS3RepositoryInServeConfig: `lifeboat serve` with [repository]
// location = "s3:..." and the secret key in a file captures a workspace
// into the bucket; the CLI restores it from there with the same config;
// `config show` names the secret's file, never its content.
func TestS3RepositoryInServeConfig(t *testing.T) {
	srv := s3test.Start(t)
	s := newSvcEnv(t, "")
	bucket := srv.NewBucket(t)
	loc := srv.Location(bucket, "fleet")
	secretFile := filepath.Join(s.dir, "s3-secret")
	must(t, os.WriteFile(secretFile, []byte(srv.SecretKey+"\n"), 0o600))
	cfg, err := os.ReadFile(s.cfgPath)
	must(t, err)
	text := strings.Replace(string(cfg), "location = "+quoteTOML(s.repo), "location = "+quoteTOML(loc)+
		"\ns3_access_key_id = "+quoteTOML(srv.AccessKey)+"\ns3_secret_access_key_file = "+quoteTOML(secretFile)+
		"\ns3_addressing = \"path\"", 1)
	if text == string(cfg) {
		t.Fatal("the service config has no location line to replace")
	}
	must(t, os.WriteFile(s.cfgPath, []byte(text), 0o600))
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(v, "")
	}
	s.repo = loc
	r := s.run("--config", s.cfgPath, "init", "--kdf-memory-kib", "64", "--kdf-time", "1")
	if r.code != 0 {
		t.Fatalf("init through the config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	show := s.run("--config", s.cfgPath, "config", "show")
	if show.code != 0 || strings.Contains(show.stdout, srv.SecretKey) || !strings.Contains(show.stdout, secretFile) ||
		!strings.Contains(show.stdout, loc) {
		t.Fatalf("config show (exit %d) must name the location and the secret's file, never the secret:\n%s%s", show.code, show.stdout, show.stderr)
	}

	s.start()
	dir := s.sandbox("bot1", 3)
	s.cliOK("workspace", "add", "bot1", "--provider", "local", "--instance", "bot1")
	if rc := s.cliJSON("capture", "--workspace", "bot1"); rc["outcome"] != "captured" {
		t.Fatalf("capture through serve: %v", rc)
	}
	s.stop()
	target := filepath.Join(s.dir, "restored")
	r = s.run("--config", s.cfgPath, "restore", "--workspace", "bot1", "--target", target, "latest")
	if r.code != 0 {
		t.Fatalf("restore from the bucket: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if d, err := bench.Compare(dir, target); err != nil || len(d) > 0 {
		t.Fatalf("restored tree differs: %v %v", d, err)
	}
	if r := s.run("--config", s.cfgPath, "check", "--read-data"); r.code != 0 {
		t.Fatalf("check --read-data: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// export --to s3: takes the target's credentials from the AWS_*
	// variables only, never from the config's s3_* keys (those are the
	// [repository]'s).
	to := srv.Location(bucket, "copy")
	s.repo = to
	if r := s.run("--config", s.cfgPath, "init", "--kdf-memory-kib", "64", "--kdf-time", "1"); r.code != 0 {
		t.Fatalf("init of the export target: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.repo = loc
	export := []string{"--config", s.cfgPath, "export", "--to", to, "--to-password-file", s.passwdFile, "--workspace", "bot1", "latest"}
	if r := s.run(export...); r.code != exitNoRepo || !strings.Contains(r.stderr, "no credentials") {
		t.Fatalf("export --to s3: without AWS_* credentials: exit %d, want %d naming the missing credentials\n%s%s", r.code, exitNoRepo, r.stdout, r.stderr)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("LIFEBOAT_REPOSITORY_S3_ADDRESSING", "path")
	if r := s.run(export...); r.code != 0 {
		t.Fatalf("export --to s3: with AWS_* credentials: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.repo = to
	exported := filepath.Join(s.dir, "exported")
	if r := s.run("--config", s.cfgPath, "restore", "--workspace", "bot1", "--target", exported, "latest"); r.code != 0 {
		t.Fatalf("restore from the export target: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if d, err := bench.Compare(dir, exported); err != nil || len(d) > 0 {
		t.Fatalf("exported tree differs: %v %v", d, err)
	}
}

// newEnvIn is newEnv with the repository in s; for S3 the process's
// environment holds the credentials (commands run in-process and the
// binary inherit it).
func newEnvIn(t *testing.T, s storetest.Store) *env {
	e := newEnv(t)
	e.repo = s.Location
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return e
}

// quoteTOML quotes s as a TOML basic string (the paths and locations here
// have no quotes or backslashes).
func quoteTOML(s string) string { return `"` + s + `"` }
