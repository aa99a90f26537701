package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A repository whose config file went missing: commands exit 10 saying
// so (not inviting an init), init refuses with 15 and writes nothing, and
// with the config put back the snapshot restores as captured.
func TestInitRefusesRepositoryWithoutConfig(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := e.captureTree("bot1", "src", 3)
	cfgFile := filepath.Join(e.repo, "config")
	cfg, err := os.ReadFile(cfgFile)
	must(t, err)
	must(t, os.Remove(cfgFile))
	keys, err := os.ReadDir(filepath.Join(e.repo, "keys"))
	must(t, err)
	if r := e.run("snapshots"); r.code != exitNoRepo || !strings.Contains(r.stderr, "config is missing but keys/ holds its files") || strings.Contains(r.stderr, "run `lifeboat init`") {
		t.Fatalf("snapshots without the config: exit %d: %s", r.code, r.stderr)
	}
	if r := e.run("init", "--kdf-memory-kib", "64", "--kdf-time", "1"); r.code != exitRefused || !strings.Contains(r.stderr, "config is missing") {
		t.Fatalf("init over a repository without its config: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(cfgFile); !os.IsNotExist(err) {
		t.Fatalf("the refused init wrote a config: %v", err)
	}
	if after, err := os.ReadDir(filepath.Join(e.repo, "keys")); err != nil || len(after) != len(keys) {
		t.Fatalf("the refused init changed keys/: %d files, were %d (%v)", len(after), len(keys), err)
	}
	must(t, os.WriteFile(cfgFile, cfg, 0o600))
	e.restoreAndCompare("bot1", src)
}

func TestInitAndKeys(t *testing.T) {
	e := newEnv(t)
	e.init()
	if r := e.run("init", "--kdf-memory-kib", "64"); r.code != exitRefused || !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("second init: %d %s", r.code, r.stderr)
	}
	newPW := filepath.Join(e.dir, "pw2")
	if err := os.WriteFile(newPW, []byte("workspace-only-pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("key", "add", "--tiers", "workspace", "--new-password-file", newPW, "--kdf-memory-kib", "64", "--kdf-time", "1")
	keys := jsonLines(t, e.ok("key", "list", "--json").stdout)
	if len(keys) != 2 {
		t.Fatalf("key list: %v", keys)
	}
	var current, wsOnly string
	for _, k := range keys {
		if k["message_type"] != "key" || k["id"] == "" || k["created"] == "" {
			t.Fatalf("key message %v", k)
		}
		tiers := k["tiers"].([]any)
		if k["current"] == true {
			current = k["id"].(string)
			if len(tiers) != 2 {
				t.Fatalf("first key tiers %v", tiers)
			}
		} else {
			wsOnly = k["id"].(string)
			if len(tiers) != 1 || tiers[0] != "workspace" {
				t.Fatalf("workspace key tiers %v", tiers)
			}
		}
	}
	// The key in use, and the only full key, cannot be removed.
	if r := e.run("key", "remove", current[:8]); r.code != exitRefused {
		t.Fatalf("removing the key in use: exit %d", r.code)
	}
	e.passwdFile = newPW
	if r := e.run("key", "remove", current[:8]); r.code != exitRefused {
		t.Fatalf("removing the last sensitive key: exit %d %s", r.code, r.stderr)
	}
	// The workspace key cannot make a full key.
	if r := e.run("key", "add", "--tiers", "workspace,sensitive", "--new-password-file", newPW); r.code != exitTierLocked {
		t.Fatalf("workspace key adding a full key: exit %d %s", r.code, r.stderr)
	}
	// passwd swaps the key in use.
	pw3 := filepath.Join(e.dir, "pw3")
	if err := os.WriteFile(pw3, []byte("third"), 0o600); err != nil {
		t.Fatal(err)
	}
	msg := jsonLines(t, e.ok("key", "passwd", "--new-password-file", pw3, "--kdf-memory-kib", "64", "--json").stdout)
	if msg[0]["old_id"] != wsOnly {
		t.Fatalf("passwd: %v", msg)
	}
	if r := e.run("key", "list"); r.code != exitWrongPass {
		t.Fatalf("old password after passwd: exit %d", r.code)
	}
	e.passwdFile = pw3
	e.ok("key", "list")
}

func TestExitCodes(t *testing.T) {
	e := newEnv(t)
	if r := e.run("key", "list"); r.code != exitNoRepo {
		t.Fatalf("no repository: exit %d %s", r.code, r.stderr)
	}
	e.init()
	if r := e.run("key", "list", "--json"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	bad := filepath.Join(e.dir, "bad")
	if err := os.WriteFile(bad, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := e.passwdFile
	e.passwdFile = bad
	r := e.run("key", "list", "--json")
	if r.code != exitWrongPass {
		t.Fatalf("wrong password: exit %d", r.code)
	}
	lines := jsonLines(t, r.stderr)
	if len(lines) != 1 || lines[0]["message_type"] != "exit_error" || lines[0]["code"] != float64(exitWrongPass) {
		t.Fatalf("json error: %v", lines)
	}
	e.passwdFile = good
	if r := e.run("key", "list", "--bogus-flag"); r.code != exitUsage {
		t.Fatalf("bad flag: exit %d", r.code)
	}
	// Without a password source and without a terminal: usage error, no hang.
	e.passwdFile = ""
	if r := e.run("key", "list"); r.code != exitUsage || !strings.Contains(r.stderr, "LIFEBOAT_PASSWORD") {
		t.Fatalf("no password: exit %d %s", r.code, r.stderr)
	}
	e.passwdFile = good
	// A config from a newer format.
	cfgPath := filepath.Join(e.repo, "config")
	b, _ := os.ReadFile(cfgPath)
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	m["version"] = 99
	b, _ = json.Marshal(m)
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run("cat", "config"); r.code != exitNewerFormat || !strings.Contains(r.stderr, "upgrade") {
		t.Fatalf("newer format: exit %d %s", r.code, r.stderr)
	}
}

func TestCheckAndRepairIndex(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := filepath.Join(e.dir, "src")
	writeTree(t, src, 1)
	if sum := e.capture("w", src); sum["complete"] != true || sum["totals"].(map[string]any)["files"].(float64) < 10 {
		t.Fatalf("capture: %v", sum)
	}
	e.ok("check", "--read-data")
	cfg := jsonLines(t, e.ok("cat", "config", "--json").stdout)
	raw, _ := json.Marshal(cfg)
	if strings.Contains(string(raw), "polynomial") || cfg[0]["version"] != float64(1) {
		t.Fatalf("cat config: %s", raw)
	}
	// Lose every index object and the cache: repair rebuilds them from packs.
	idx, _ := filepath.Glob(filepath.Join(e.repo, "index", "*"))
	for _, p := range idx {
		_ = os.Remove(p)
	}
	_ = os.RemoveAll(e.cache)
	rep := jsonLines(t, e.ok("repair", "index", "--json").stdout)
	if rep[0]["blobs"].(float64) == 0 {
		t.Fatalf("repair: %v", rep)
	}
	e.ok("check", "--read-data")
	e.restoreAndCompare("w", src)
	if nb := newBytes(e.capture("w", src, "--force")); nb != 0 {
		t.Fatalf("after repair everything should dedup, %v new bytes", nb)
	}
	// Damage a pack: check --read-data fails with the integrity exit code.
	packs, _ := filepath.Glob(filepath.Join(e.repo, "data", "*", "*"))
	b, _ := os.ReadFile(packs[0])
	b[len(b)/2] ^= 0x40
	_ = os.WriteFile(packs[0], b, 0o600)
	if r := e.run("check", "--read-data"); r.code != exitCorrupt {
		t.Fatalf("damaged pack: exit %d %s", r.code, r.stdout)
	}
}

// Two real processes capturing into one repository at once both succeed,
// and the repository checks clean and restores both afterwards.
func TestTwoProcesses(t *testing.T) {
	bin := lifeboatBinary(t)
	e := newEnv(t)
	e.init()
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	srcs := make([]string, 2)
	for i := range 2 {
		srcs[i] = filepath.Join(e.dir, "src", string(rune('a'+i)))
		writeTree(t, srcs[i], uint64(10+i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile,
				"capture", "--workspace", filepath.Base(srcs[i]), srcs[i])
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	e.ok("check", "--read-data")
	for _, src := range srcs {
		e.restoreAndCompare(filepath.Base(src), src)
	}
}
