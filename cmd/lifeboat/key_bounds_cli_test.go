package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// The key-file denial of service (see repo/keys_dos_test.go), through
// the command line. Not parallel: they count key derivations.

func (e *env) keyFileNames() []string {
	e.t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.repo, "keys"))
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	return names
}

// `key add` and `key passwd` create nothing beyond the documented bounds:
// exit 2 before the repository is opened (no derivation), nothing written.
func TestKeyAddRefusesKDFBeyondBounds(t *testing.T) {
	e := newEnv(t)
	e.init()
	newPW := filepath.Join(e.dir, "pw2")
	if err := os.WriteFile(newPW, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := e.keyFileNames()
	before := crypt.KeyDerivations()
	for _, args := range [][]string{
		{"key", "add", "--new-password-file", newPW, "--kdf-time", "9"},
		{"key", "add", "--new-password-file", newPW, "--kdf-memory-kib", "262145"},
		{"key", "add", "--new-password-file", newPW, "--kdf-memory-kib", "1048576", "--kdf-time", "16"},
		{"key", "passwd", "--new-password-file", newPW, "--kdf-time", "16"},
	} {
		r := e.run(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "argon2id cost beyond the bounds") || !strings.Contains(r.stderr, "at most 8 passes and 262144 KiB") {
			t.Fatalf("%v: exit %d, %s; want exit %d naming the bounds", args, r.code, r.stderr, exitUsage)
		}
	}
	if d := crypt.KeyDerivations() - before; d != 0 {
		t.Fatalf("refused key commands derived %d keys", d)
	}
	if got := e.keyFileNames(); len(got) != len(keys) {
		t.Fatalf("key files after refusals: %v, before %v", got, keys)
	}
	// The documented bound itself is accepted (not derived here: seconds).
	if _, err := (&kdfFlags{time: crypt.MaxKDFTime, memoryKiB: crypt.MaxKDFMemoryKiB}).checked(); err != nil {
		t.Fatalf("flags at the bound refused: %v", err)
	}
}

// `init` refuses argon2id costs beyond the documented bounds the same way:
// exit 2 naming the bound, before any derivation, and no repository made.
func TestInitRefusesKDFBeyondBounds(t *testing.T) {
	e := newEnv(t)
	before := crypt.KeyDerivations()
	for _, args := range [][]string{
		{"init", "--kdf-time", "9"},
		{"init", "--kdf-memory-kib", "262145"},
		{"init", "--kdf-memory-kib", "4194304", "--kdf-time", "64"},
	} {
		r := e.run(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "argon2id cost beyond the bounds") || !strings.Contains(r.stderr, "at most 8 passes and 262144 KiB") {
			t.Fatalf("%v: exit %d, %s; want exit %d naming the bounds", args, r.code, r.stderr, exitUsage)
		}
	}
	// Below the minimum memory, the message names the minimum for the
	// lanes used: 8 KiB per lane, 32 KiB with the default 4.
	if r := e.run("init", "--kdf-time", "1", "--kdf-memory-kib", "31"); r.code != exitUsage || !strings.Contains(r.stderr, "below 32 KiB, the minimum with 4 lanes") {
		t.Fatalf("init with 31 KiB: exit %d, %s; want exit %d naming 32 KiB", r.code, r.stderr, exitUsage)
	}
	if d := crypt.KeyDerivations() - before; d != 0 {
		t.Fatalf("refused inits derived %d keys", d)
	}
	if _, err := os.Stat(e.repo); !os.IsNotExist(err) {
		t.Fatalf("a refused init left %s: %v", e.repo, err)
	}
}

// forgeKeyFiles writes n copies of the repository's key file asking for
// 1 GiB and 16 passes, dated a year ahead, named (by their hash, as the
// repository requires) to sort before every other key file.
func (e *env) forgeKeyFiles(n int) []string {
	e.t.Helper()
	names := e.keyFileNames()
	real, err := os.ReadFile(filepath.Join(e.repo, "keys", names[0]))
	if err != nil {
		e.t.Fatal(err)
	}
	var kf crypt.KeyFile
	if err := json.Unmarshal(real, &kf); err != nil {
		e.t.Fatal(err)
	}
	kf.KDF.Time, kf.KDF.MemoryKiB = 16, 1024*1024
	kf.Created = time.Now().Add(365 * 24 * time.Hour).UTC()
	var forged []string
	for i := 0; len(forged) < n; i++ {
		kf.Hostname = fmt.Sprintf("attacker-%d", i)
		data, err := json.Marshal(kf)
		if err != nil {
			e.t.Fatal(err)
		}
		id := blob.ID(blake3.Sum256(data)).String()
		if id > names[0] {
			continue
		}
		if err := os.WriteFile(filepath.Join(e.repo, "keys", id), data, 0o600); err != nil {
			e.t.Fatal(err)
		}
		forged = append(forged, id)
	}
	return forged
}

// With forged key files of 1 GiB and 16 passes sorted first and dated
// newest, every command derives once; each run names them with what to
// do; `key list` marks them; `key remove` removes them.
func TestForgedKeyFilesCLI(t *testing.T) {
	e := newEnv(t)
	e.init()
	forged := e.forgeKeyFiles(3)

	before := crypt.KeyDerivations()
	r := e.ok("key", "list")
	if d := crypt.KeyDerivations() - before; d != 1 {
		t.Fatalf("key list derived %d keys, want 1", d)
	}
	for _, id := range forged {
		short := id[:8]
		if !strings.Contains(r.stderr, "warning: key file "+short+" refused before deriving") || !strings.Contains(r.stderr, "lifeboat key remove "+short) {
			t.Fatalf("no warning naming %s and what to do:\n%s", short, r.stderr)
		}
		if !strings.Contains(r.stdout, "!  "+short+"  workspace, sensitive") || !strings.Contains(r.stdout, "! "+short+" not tried: argon2id cost beyond the bounds") {
			t.Fatalf("key list does not mark %s:\n%s", short, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "3 key files that are not tried") {
		t.Fatalf("key list says nothing about the marked key files: %q", r.stderr)
	}
	// A wrong password is still one derivation, and exit 11.
	bad := filepath.Join(e.dir, "bad")
	if err := os.WriteFile(bad, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := e.passwdFile
	e.passwdFile = bad
	before = crypt.KeyDerivations()
	if r := e.run("key", "list"); r.code != exitWrongPass || crypt.KeyDerivations()-before != 1 {
		t.Fatalf("wrong password: exit %d after %d derivations: %s", r.code, crypt.KeyDerivations()-before, r.stderr)
	}
	e.passwdFile = good
	for _, id := range forged {
		e.ok("key", "remove", id[:8])
	}
	r = e.ok("key", "list")
	if strings.Contains(r.stderr, "warning") || len(jsonLines(t, e.ok("key", "list", "--json").stdout)) != 1 {
		t.Fatalf("after removing the forged key files: warnings %q, keys %s", r.stderr, r.stdout)
	}
}

// A junk file in keys/ is set aside with a warning in the CLI's own form
// (`warning: ...` on stderr, naming it and what to do), and under --json
// nothing but JSON is printed: stderr stays empty, also for key remove.
func TestUnusableKeyFileWarning(t *testing.T) {
	e := newEnv(t)
	e.init()
	junk := []byte("not a key file")
	id := blob.ID(blake3.Sum256(junk)).String()
	if err := os.WriteFile(filepath.Join(e.repo, "keys", id), junk, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.ok("snapshots")
	if !strings.HasPrefix(r.stderr, "warning: key file "+id[:8]+" is not usable") || !strings.Contains(r.stderr, "lifeboat key remove "+id[:8]) ||
		strings.Contains(r.stderr, "WARN") {
		t.Fatalf("snapshots with a junk key file: stderr %q", r.stderr)
	}
	if r := e.ok("--json", "snapshots"); r.stderr != "" {
		t.Fatalf("--json snapshots with a junk key file printed on stderr: %q", r.stderr)
	}
	r = e.ok("--json", "key", "remove", id[:8])
	if r.stderr != "" || len(jsonLines(t, r.stdout)) != 1 {
		t.Fatalf("--json key remove of the junk key file: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if r := e.ok("snapshots"); strings.Contains(r.stderr, "warning") || strings.Contains(r.stderr, "not usable") {
		t.Fatalf("after removing the junk key file: stderr %q", r.stderr)
	}
}
