package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/internal/proctest"
)

// A repository the user may not read is reported as a permission error
// naming the path, the user and what to do, with exit code 22, never as
// "no repository" (10). As root (which permissions do not stop) the built
// lifeboat runs as user nobody (65534); otherwise the repository is made
// mode 000.
func TestRepositoryPermissionDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		testRepositoryMode000(t)
		return
	}
	base := proctest.SharedTempDir(t, 0o755)
	bin := filepath.Join(base, "lifeboat")
	proctest.CopyExecutable(t, lifeboatBinary(t), bin)
	e := newEnv(t)
	e.repo = filepath.Join(base, "repo")
	e.init()
	e.ok("snapshots") // the repository itself is fine

	asNobody := func(repoDir string, args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--repo", repoDir, "--cache-dir", filepath.Join(base, "cache")}, args...)...)
		cmd.Env = append(os.Environ(), "LIFEBOAT_PASSWORD="+testPW, "HOME="+base)
		cmd.SysProcAttr = proctest.AsNobody()
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		res := result{stdout: out.String(), stderr: errb.String()}
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			res.code = exit.ExitCode()
		case err != nil:
			t.Fatalf("running lifeboat as nobody: %v", err)
		}
		return res
	}
	denied := func(what string, r result, refused string) {
		t.Helper()
		if r.code != exitNoAccess {
			t.Fatalf("%s: exit %d, want %d\nstderr: %s", what, r.code, exitNoAccess, r.stderr)
		}
		for _, want := range []string{"permission denied", refused, "run lifeboat as a user that may read the repository"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: message lacks %q: %s", what, want, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "no repository") || strings.Contains(r.stderr, "neither config") {
			t.Errorf("%s: still says there is no repository: %s", what, r.stderr)
		}
	}

	// The directory is searchable, its config file (0600) is not readable.
	if err := os.Chmod(e.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	denied("unreadable config", asNobody(e.repo, "snapshots"), filepath.Join(e.repo, "config"))

	// The config is readable, the keys/ directory (0700) is not.
	cfg := filepath.Join(e.repo, "config")
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	denied("unreadable keys/", asNobody(e.repo, "snapshots"), "listing its key files (keys/)")
	if err := os.Chmod(cfg, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}

	// An export from a repository nobody owns into one that refuses nobody
	// names the refusal (22), not "no repository" (10).
	own := filepath.Join(base, "nobody")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	src, ownCache := filepath.Join(own, "repo"), filepath.Join(own, "cache")
	if r := asNobody(src, "--cache-dir", ownCache, "init", "--kdf-memory-kib", "64", "--kdf-time", "1"); r.code != 0 {
		t.Fatalf("init as nobody: exit %d: %s", r.code, r.stderr)
	}
	if r := asNobody(src, "--cache-dir", ownCache, "capture", "--workspace", "w", own); r.code != 0 {
		t.Fatalf("capture as nobody: exit %d: %s", r.code, r.stderr)
	}
	pwFile := filepath.Join(own, "pw")
	if err := os.WriteFile(pwFile, []byte(testPW), 0o644); err != nil {
		t.Fatal(err)
	}
	r := asNobody(src, "--cache-dir", ownCache, "export", "--workspace", "w", "--to", e.repo, "--to-password-file", pwFile, "latest")
	if r.code != exitNoAccess || !strings.Contains(r.stderr, "export target") || !strings.Contains(r.stderr, "permission denied") ||
		!strings.Contains(r.stderr, e.repo) || strings.Contains(r.stderr, "no repository") {
		t.Errorf("export into a repository that refuses nobody: exit %d, want %d\nstderr: %s", r.code, exitNoAccess, r.stderr)
	}
	// An export target that is not a repository is still 10.
	if r := asNobody(src, "--cache-dir", ownCache, "export", "--workspace", "w", "--to", own, "--to-password-file", pwFile, "latest"); r.code != exitNoRepo ||
		!strings.Contains(r.stderr, "export target") {
		t.Errorf("export into a directory without a repository: exit %d, want %d\nstderr: %s", r.code, exitNoRepo, r.stderr)
	}

	// The repository directory (0700, as init makes it) refuses nobody.
	if err := os.Chmod(e.repo, 0o700); err != nil {
		t.Fatal(err)
	}
	r = asNobody(e.repo, "snapshots")
	denied("repository directory", r, e.repo+" is owned by uid 0 with mode drwx------")
	if !strings.Contains(r.stderr, "uid 65534") {
		t.Errorf("the message does not name the user: %s", r.stderr)
	}
	r = asNobody(e.repo, "--json", "snapshots")
	if lines := jsonLines(t, r.stderr); r.code != exitNoAccess || len(lines) != 1 || lines[0]["code"] != float64(exitNoAccess) {
		t.Errorf("--json: exit %d, %v", r.code, lines)
	}

	// A directory above it refuses search access.
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(private, "repo")
	if err := os.Rename(e.repo, moved); err != nil {
		t.Fatal(err)
	}
	denied("a parent directory", asNobody(moved, "snapshots"), private+" is owned by uid 0 with mode drwx------")

	// A place with no repository is still exit 10.
	empty := filepath.Join(base, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := asNobody(empty, "snapshots"); r.code != exitNoRepo {
		t.Errorf("no repository: exit %d, want %d: %s", r.code, exitNoRepo, r.stderr)
	}
}

// testRepositoryMode000 is TestRepositoryPermissionDenied for a user
// other than root: permissions stop it in-process.
func testRepositoryMode000(t *testing.T) {
	e := newEnv(t)
	e.init()
	if err := os.Chmod(e.repo, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(e.repo, 0o700) })
	r := e.run("snapshots")
	if r.code != exitNoAccess || !strings.Contains(r.stderr, "permission denied") || !strings.Contains(r.stderr, e.repo+" is owned by uid") {
		t.Fatalf("exit %d, want %d with a permission error naming %s\nstderr: %s", r.code, exitNoAccess, e.repo, r.stderr)
	}
	// keys/ alone refuses this user.
	must(t, os.Chmod(e.repo, 0o700))
	keys := filepath.Join(e.repo, "keys")
	must(t, os.Chmod(keys, 0))
	t.Cleanup(func() { _ = os.Chmod(keys, 0o700) })
	r = e.run("snapshots")
	if r.code != exitNoAccess || !strings.Contains(r.stderr, "listing its key files (keys/)") {
		t.Fatalf("unreadable keys/: exit %d, want %d\nstderr: %s", r.code, exitNoAccess, r.stderr)
	}
}
