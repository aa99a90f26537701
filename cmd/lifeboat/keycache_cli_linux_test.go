package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/crypt"
	"lifeboat/internal/keyring/keyringtest"
)

// kekEntry returns the /proc/keys fields of the key cache entry of the
// repository's first key file (nil: none), and its name.
func (e *env) kekEntry() ([]string, string) {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.repo, "keys", e.keyFileNames()[0]))
	if err != nil {
		e.t.Fatal(err)
	}
	kf, err := crypt.DecodeKeyFile(data)
	if err != nil {
		e.t.Fatal(err)
	}
	name := crypt.KEKCacheName(kf.KDF)
	return keyringtest.Entry(e.t, name), name
}

// --key-cache keeps the key init derived in the user's kernel keyring,
// sealed, for as long as it says and for its possessor only; the commands
// after it derive nothing, unless --key-cache or LIFEBOAT_KEY_CACHE is 0.
// A wrong password is still refused, and a bad value is a usage error.
func TestKeyCacheSkipsDerivation(t *testing.T) {
	keyringtest.Require(t)
	e := newEnv(t)
	src := filepath.Join(e.dir, "src")
	writeTree(t, src, 1)
	before := crypt.KeyDerivations()
	derived := func() uint64 { return crypt.KeyDerivations() - before }
	e.ok("--key-cache", "2m", "init", "--kdf-memory-kib", "64", "--kdf-time", "1")
	entry, name := e.kekEntry()
	t.Cleanup(func() { keyringtest.Remove(name) })
	if entry == nil {
		t.Fatalf("init with --key-cache 2m kept no entry %s in the user keyring", name)
	}
	if timeout, perm, size := entry[3], entry[4], entry[9]; (timeout != "2m" && timeout != "1m") || perm != "3f000000" || size != "72" {
		t.Fatalf("entry %s: timeout %s, permissions %s, %s bytes; want 2m, 3f000000 (its possessor only), 72 (a sealed key)", name, timeout, perm, size)
	}
	if derived() != 1 {
		t.Fatalf("init derived %d keys, want 1", derived())
	}
	e.ok("--key-cache", "2m", "capture", "--workspace", "w1", src)
	e.ok("--key-cache", "2m", "snapshots")
	if derived() != 1 {
		t.Fatalf("capture and snapshots with the cached key derived %d keys, want none", derived()-1)
	}
	t.Setenv(keyCacheEnv, "2m")
	e.ok("snapshots")
	if derived() != 1 {
		t.Fatal("LIFEBOAT_KEY_CACHE=2m: snapshots derived a key")
	}
	e.ok("--key-cache", "0", "snapshots")
	if derived() != 2 {
		t.Fatalf("--key-cache 0: %d derivations in all, want 2", derived())
	}
	t.Setenv(keyCacheEnv, "0")
	e.ok("snapshots")
	if derived() != 3 {
		t.Fatalf("LIFEBOAT_KEY_CACHE=0: %d derivations in all, want 3", derived())
	}

	wrong := filepath.Join(e.dir, "wrong-pw")
	if err := os.WriteFile(wrong, []byte("not the password"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run("--key-cache", "2m", "--password-file", wrong, "snapshots")
	if r.code != exitWrongPass || !strings.Contains(r.stderr, "wrong password") {
		t.Fatalf("a wrong password with a cached key: exit %d, %s; want %d", r.code, r.stderr, exitWrongPass)
	}
	if derived() != 4 {
		t.Fatalf("the wrong password: %d derivations in all, want 4 (tried, not taken from the cache)", derived())
	}
	e.ok("--key-cache", "2m", "snapshots")
	if derived() != 4 {
		t.Fatal("the entry did not survive a wrong password")
	}

	// A second key file, newer and of the same cost, sorts first: the
	// first password still finds its entry without deriving for it, as
	// it does when --key-hint names its key file.
	second := filepath.Join(e.dir, "pw2")
	if err := os.WriteFile(second, []byte("second password"), 0o600); err != nil {
		t.Fatal(err)
	}
	firstKey := e.keyFileNames()[0]
	e.ok("--key-cache", "2m", "key", "add", "--new-password-file", second, "--kdf-memory-kib", "64", "--kdf-time", "1")
	before = crypt.KeyDerivations()
	e.ok("--key-cache", "2m", "snapshots")
	e.ok("--key-cache", "2m", "--key-hint", firstKey[:8], "snapshots")
	if derived() != 0 {
		t.Fatalf("with two key files: %d derivations, want none", derived())
	}

	for _, c := range []struct{ env, flag, want string }{
		{"soon", "", "LIFEBOAT_KEY_CACHE=\"soon\" is not a duration"},
		{"-1m", "", "LIFEBOAT_KEY_CACHE=\"-1m\" is negative"},
		{"", "-1m", "--key-cache -1m0s: want 0 or more (0: keep no key)"},
		{"", "25h", "--key-cache 25h0m0s (or LIFEBOAT_KEY_CACHE) is too long: at most 24h0m0s"},
		{"25h", "", "--key-cache 25h0m0s (or LIFEBOAT_KEY_CACHE) is too long"},
	} {
		t.Setenv(keyCacheEnv, c.env)
		args := []string{"snapshots"}
		if c.flag != "" {
			args = append([]string{"--key-cache", c.flag}, args...)
		}
		if r := e.run(args...); r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Fatalf("LIFEBOAT_KEY_CACHE=%q %v: exit %d, %s; want exit %d saying %q", c.env, args, r.code, r.stderr, exitUsage, c.want)
		}
	}
	if derived() != 0 {
		t.Fatal("a refused key-cache value derived a key")
	}
}

// A password typed at the prompt or read from a FIFO is never cached:
// init and snapshots asked on a terminal, and snapshots reading a FIFO,
// keep no entry, while the same password from a file does.
func TestKeyCacheSkipsTypedPassword(t *testing.T) {
	keyringtest.Require(t)
	e := newEnv(t)
	tty := openPTY(t)
	if _, err := tty.master.WriteString(testPW + "\n" + testPW + "\n"); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	code := run(context.Background(), []string{"--repo", e.repo, "--cache-dir", e.cache, "--key-cache", "2m",
		"init", "--kdf-memory-kib", "64", "--kdf-time", "1"}, tty.slave, &out, &errb)
	if code != 0 {
		t.Fatalf("init with a typed password: exit %d, %s", code, errb.String())
	}
	entry, name := e.kekEntry()
	t.Cleanup(func() { keyringtest.Remove(name) })
	if entry != nil {
		t.Fatalf("init kept entry %s for a typed password", name)
	}
	if _, err := tty.master.WriteString(testPW + "\n"); err != nil {
		t.Fatal(err)
	}
	code = run(context.Background(), []string{"--repo", e.repo, "--cache-dir", e.cache, "--key-cache", "2m", "snapshots"}, tty.slave, &out, &errb)
	if code != 0 {
		t.Fatalf("snapshots with a typed password: exit %d, %s", code, errb.String())
	}
	if entry, _ := e.kekEntry(); entry != nil {
		t.Fatalf("snapshots kept entry %s for a typed password", name)
	}

	// From a FIFO: stored nowhere either.
	fifo := filepath.Join(e.dir, "pw-fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() { written <- os.WriteFile(fifo, []byte(testPW), 0o600) }()
	if r := e.run("--key-cache", "2m", "--password-file", fifo, "snapshots"); r.code != 0 {
		t.Fatalf("snapshots with the password from a FIFO: exit %d, %s", r.code, r.stderr)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if entry, _ := e.kekEntry(); entry != nil {
		t.Fatalf("snapshots kept entry %s for a password read from a FIFO", name)
	}

	e.ok("--key-cache", "2m", "snapshots")
	if entry, _ := e.kekEntry(); entry == nil {
		t.Fatalf("the same password from a file kept no entry %s", name)
	}
}

// pty is a pseudo-terminal: what is written to master is read from slave.
type pty struct{ master, slave *os.File }

func openPTY(t *testing.T) pty {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return pty{master, slave}
}
