package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/bench"
	"lifeboat/internal/nstest"
)

// `restore --replace --target REPO/data` (or index, keys, snapshots)
// must not destroy the repository. Every target
// inside or around the repository, the cache directory or the state
// directory (--state-dir, LIFEBOAT_STATE_DIR, the config's), by a plain
// or a symlinked spelling, is refused with exit code 2 and a message
// naming both paths; nothing is changed, and the repository checks clean.
func TestRestoreIntoOwnDataRefusedCLI(t *testing.T) {
	e := newEnv(t)
	t.Setenv("LIFEBOAT_STATE_DIR", "")
	t.Setenv("LIFEBOAT_CONFIG", "")
	e.init()
	src := e.captureTree("w", "src", 1)
	state := filepath.Join(e.dir, "state")
	must(t, os.MkdirAll(filepath.Join(state, "locks"), 0o700))
	must(t, os.WriteFile(filepath.Join(state, "state.db"), []byte("records"), 0o600))
	alias := filepath.Join(e.dir, "alias")
	must(t, os.Symlink(e.repo, alias))
	cfg := filepath.Join(e.dir, "lifeboat.toml")
	tokens := filepath.Join(e.dir, "tokens")
	must(t, os.WriteFile(tokens, nil, 0o600))
	must(t, os.WriteFile(cfg, fmt.Appendf(nil, "[repository]\nlocation = %q\npassword_file = %q\ncache_dir = %q\n\n[state]\ndir = %q\n\n[server]\ntokens_file = %q\n",
		e.repo, e.passwdFile, e.cache, state, tokens), 0o600))
	before := map[string]string{}
	for _, d := range []string{e.repo, e.cache, state} {
		before[d] = dumpDir(t, d)
	}

	type refusal struct {
		target, what, path string
		pre                []string // global flags
		env                string   // LIFEBOAT_STATE_DIR
	}
	var cases []refusal
	for _, sub := range []string{"", "data", "index", "keys", "snapshots", "new"} {
		cases = append(cases, refusal{target: filepath.Join(e.repo, sub), what: "the repository", path: e.repo})
	}
	cases = append(cases,
		refusal{target: filepath.Join(alias, "data"), what: "the repository", path: e.repo},
		refusal{target: e.dir, what: "the repository", path: e.repo},
		refusal{target: e.cache, what: "the cache directory", path: e.cache},
		refusal{target: filepath.Join(e.cache, "x"), what: "the cache directory", path: e.cache},
		refusal{target: state, what: "the state directory", path: state, pre: []string{"--state-dir", state}},
		refusal{target: filepath.Join(state, "locks"), what: "the state directory", path: state, env: state},
		refusal{target: filepath.Join(state, "new"), what: "the state directory", path: state, pre: []string{"--config", cfg}},
	)
	for _, c := range cases {
		t.Setenv("LIFEBOAT_STATE_DIR", c.env)
		for _, replace := range []bool{true, false} {
			args := append(append([]string{}, c.pre...), "restore", "--workspace", "w", "--target", c.target)
			if replace {
				args = append(args, "--replace")
			}
			r := e.run(append(args, "latest")...)
			if r.code != exitUsage || !strings.Contains(r.stderr, c.target) || !strings.Contains(r.stderr, c.what+" "+c.path) {
				t.Errorf("restore into %s (replace %v): exit %d\n%s", c.target, replace, r.code, r.stderr)
			}
		}
	}
	t.Setenv("LIFEBOAT_STATE_DIR", "")
	t.Logf("for example: %s", e.run("restore", "--workspace", "w", "--replace", "--target", filepath.Join(alias, "data"), "latest").stderr)
	for d, b := range before {
		if after := dumpDir(t, d); after != b {
			t.Errorf("%s changed:\nbefore:\n%s\nafter:\n%s", d, b, after)
		}
	}
	e.ok("check", "--read-data")
	e.restoreAndCompare("w", src)
}

// dumpDir lists every entry under dir with its type, size and content.
func dumpDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d", strings.TrimPrefix(p, dir), fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(c))
		}
		b.WriteByte('\n')
		return nil
	})
	must(t, err)
	return b.String()
}

// Through the CLI: `restore --replace` of a directory
// holding a bind mount of a directory on the same filesystem exits 0, the
// mount's source keeps every file, the rest of the replaced tree is
// removed, and the output names the mount point that stayed and says to
// unmount it, then remove what is left. The next restore beside it, once
// it is unmounted, removes the rest.
func TestRestoreReplaceKeepsBindMountCLI(t *testing.T) {
	if !nstest.InOwnMountNamespace(t) {
		return
	}
	e := newEnv(t)
	e.init()
	src := e.captureTree("w", "src", 2)
	outside := filepath.Join(e.dir, "outside")
	must(t, os.MkdirAll(filepath.Join(outside, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "sub", "precious"), []byte("the mount's source"), 0o644))
	outsideBefore := dumpDir(t, outside)
	parent := filepath.Join(e.dir, "restores")
	target := filepath.Join(parent, "work")
	must(t, os.MkdirAll(filepath.Join(target, "mnt"), 0o755))
	must(t, os.WriteFile(filepath.Join(target, "old"), []byte("old"), 0o644))
	if err := unix.Mount(outside, filepath.Join(target, "mnt"), "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	var moved string
	t.Cleanup(func() {
		_ = unix.Unmount(filepath.Join(target, "mnt"), unix.MNT_DETACH)
		if moved != "" {
			_ = unix.Unmount(moved, unix.MNT_DETACH)
		}
	})

	r := e.ok("restore", "--workspace", "w", "--replace", "--target", target, "latest")
	t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	if d, err := bench.Compare(src, target); err != nil || len(d) > 0 {
		t.Fatalf("restored tree differs: %v %v", d, err)
	}
	if got := dumpDir(t, outside); got != outsideBefore {
		t.Fatalf("the bind mount's source changed:\nbefore:\n%s\nafter:\n%s", outsideBefore, got)
	}
	left, _ := filepath.Glob(filepath.Join(parent, ".lifeboat-restore-*"))
	if len(left) != 1 {
		t.Fatalf("what stayed beside the target: %q", left)
	}
	moved = filepath.Join(left[0], "mnt")
	for _, s := range []string{r.stdout, r.stderr} {
		if !strings.Contains(s, moved) || !strings.Contains(s, "a mount point") || !strings.Contains(s, "unmount it, then remove "+left[0]) {
			t.Errorf("the output does not name %s and what to do:\n%s", moved, s)
		}
	}
	if _, err := os.Stat(filepath.Join(left[0], "old")); !os.IsNotExist(err) {
		t.Errorf("the replaced tree's own file was not removed: %v", err)
	}
	js := jsonLines(t, e.ok("restore", "--workspace", "w", "--target", filepath.Join(parent, "second"), "--json", "latest").stdout)
	var kept bool
	for _, m := range js {
		kept = kept || m["message_type"] == "error" && m["path"] == left[0] && strings.Contains(fmt.Sprint(m["error"]), "a mount point")
	}
	if !kept {
		t.Errorf("a restore beside the leftover does not say why it stays: %v", js)
	}

	must(t, unix.Unmount(moved, 0))
	moved = ""
	r = e.ok("restore", "--workspace", "w", "--target", filepath.Join(parent, "third"), "latest")
	if !strings.Contains(r.stderr, "removed "+left[0]) {
		t.Errorf("the next restore does not say it removed %s:\n%s", left[0], r.stderr)
	}
	if l, _ := filepath.Glob(filepath.Join(parent, ".lifeboat-*")); len(l) > 0 {
		t.Errorf("left behind: %q", l)
	}
	if got := dumpDir(t, outside); got != outsideBefore {
		t.Errorf("the bind mount's source changed:\n%s", got)
	}
}
