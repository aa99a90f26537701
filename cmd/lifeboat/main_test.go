package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/bench"
	"lifeboat/internal/jsonlines/jsonlinestest"
	"lifeboat/internal/proctest"
)

const testPW = "cli-test-password-4711"

// env is one isolated lifeboat environment: repository, cache, password.
type env struct {
	t          *testing.T
	repo, dir  string
	cache      string
	passwdFile string
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	e := &env{t: t, repo: filepath.Join(dir, "repo"), dir: dir, cache: filepath.Join(dir, "cache"), passwdFile: filepath.Join(dir, "pw")}
	if err := os.WriteFile(e.passwdFile, []byte(testPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"LIFEBOAT_REPO", "LIFEBOAT_PASSWORD", "LIFEBOAT_PASSWORD_FILE", "LIFEBOAT_CACHE_DIR", "LIFEBOAT_KEY_HINT"} {
		t.Setenv(v, "")
	}
	return e
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs lifeboat in-process with the env's repository and password.
func (e *env) run(args ...string) result {
	e.t.Helper()
	full := append([]string{"--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile}, args...)
	var out, errb bytes.Buffer
	code := run(context.Background(), full, strings.NewReader(""), &out, &errb)
	res := result{code, out.String(), errb.String()}
	for _, s := range []string{res.stdout, res.stderr} {
		if strings.Contains(s, testPW) {
			e.t.Fatalf("password leaked into output of %v", args)
		}
	}
	return res
}

func (e *env) ok(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("lifeboat %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

func (e *env) init() {
	e.t.Helper()
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1")
}

// jsonLines decodes --json output.
var jsonLines = jsonlinestest.Parse

// lifeboatBinary builds the command for tests that need real processes,
// with the test hooks of crash.go compiled in.
func lifeboatBinary(t testing.TB) string {
	t.Helper()
	return proctest.BuildLifeboat(t, testHooksTag)
}

// capture captures src as workspace ws and returns the summary message.
func (e *env) capture(ws, src string, extra ...string) map[string]any {
	e.t.Helper()
	args := append([]string{"capture", "--workspace", ws, "--json"}, extra...)
	lines := jsonLines(e.t, e.ok(append(args, src)...).stdout)
	return lines[len(lines)-1]
}

// captureTree writes the test tree of seed into the directory name under
// e.dir, captures it as workspace ws and returns the directory.
func (e *env) captureTree(ws, name string, seed uint64) string {
	e.t.Helper()
	dir := filepath.Join(e.dir, name)
	writeTree(e.t, dir, seed)
	e.capture(ws, dir)
	return dir
}

// newBytes reads totals.new_bytes from a capture summary.
func newBytes(sum map[string]any) float64 {
	return sum["totals"].(map[string]any)["new_bytes"].(float64)
}

// restoreAndCompare restores the latest snapshot of ws into a new directory
// and checks it matches want exactly.
func (e *env) restoreAndCompare(ws, want string) {
	e.t.Helper()
	target, err := os.MkdirTemp(e.dir, "restore-")
	if err != nil {
		e.t.Fatal(err)
	}
	target = filepath.Join(target, "t")
	e.ok("restore", "--workspace", ws, "--target", target, "latest")
	if d, err := bench.Compare(want, target); err != nil || len(d) > 0 {
		e.t.Fatalf("restored %s differs from %s: %v %v", ws, want, d, err)
	}
}
