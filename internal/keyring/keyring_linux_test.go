package keyring

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testName is a fresh entry name, so that parallel runs never meet.
func testName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "lifeboat:test:" + hex.EncodeToString(b)
}

// procKey is the /proc/keys line of the user key named name, if any.
func procKey(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open("/proc/keys")
	if err != nil {
		t.Skipf("no /proc/keys: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 9 && fields[7] == "user" && strings.TrimSuffix(fields[8], ":") == name {
			return fields
		}
	}
	return nil
}

func requireKeyring(t *testing.T) {
	t.Helper()
	if !Available() {
		t.Skip("the kernel keyring is not available to this process (no keyrings, or a seccomp filter refuses them)")
	}
}

func openCache(t *testing.T, ttl time.Duration) *Cache {
	t.Helper()
	c, err := Open(ttl, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An entry comes back from a later Get, replaced by a later Put, with the
// cache's timeout and permissions for its possessor only; a name never
// kept reads as nil, and nothing is left in the process keyring.
func TestPutGet(t *testing.T) {
	requireKeyring(t)
	c := openCache(t, 3*time.Minute)
	name := testName()
	if got := c.Get(name); got != nil {
		t.Fatalf("Get of a name never kept = %q, want nil", got)
	}
	c.Put(name, []byte("first"))
	t.Cleanup(func() { clearEntry(name) })
	if got := c.Get(name); string(got) != "first" {
		t.Fatalf("Get = %q, want %q", got, "first")
	}
	c.Put(name, []byte("second"))
	if got := c.Get(name); string(got) != "second" {
		t.Fatalf("Get after a second Put = %q, want %q", got, "second")
	}
	line := procKey(t, name)
	if line == nil {
		t.Fatalf("%s is not in /proc/keys", name)
	}
	// ID flags usage timeout perm uid gid type description
	if timeout := line[3]; timeout != "3m" && timeout != "2m" {
		t.Fatalf("timeout of %s = %q, want 3m (or 2m once a second passed)", name, timeout)
	}
	if perm := line[4]; perm != "3f000000" {
		t.Fatalf("permissions of %s = %s, want 3f000000 (its possessor only)", name, perm)
	}
	if id, err := unix.KeyctlSearch(unix.KEY_SPEC_PROCESS_KEYRING, "user", name, 0); err == nil {
		t.Fatalf("%s (key %d) is still in the process keyring", name, id)
	}
}

// Open refuses a time the kernel cannot count or that keeps nothing,
// rounds a fraction of a second up, and keeps one secret per directory:
// 32 bytes, this user's alone; a secret file anyone else may read is
// refused.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, ttl := range []time.Duration{0, -time.Second, MaxTTL + time.Second} {
		if _, err := Open(ttl, dir); err == nil {
			t.Fatalf("Open(%s) succeeded", ttl)
		}
	}
	a, err := Open(1500*time.Millisecond, dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.ttl != 2*time.Second {
		t.Fatalf("ttl of 1.5s = %s, want 2s", a.ttl)
	}
	b, err := Open(time.Minute, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Secret()) != 32 || !bytes.Equal(a.Secret(), b.Secret()) {
		t.Fatalf("secrets %x and %x: want the same 32 bytes", a.Secret(), b.Secret())
	}
	other, err := Open(time.Minute, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other.Secret(), a.Secret()) {
		t.Fatal("two directories share a secret")
	}
	path := filepath.Join(dir, secretFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v, mode %v; want 0600", err, fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d files, want only the secret", len(entries))
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(time.Minute, dir); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a secret file others may read: %v, want an error naming it", err)
	}
}

// A process of another user can neither find the entry through its own
// keyrings nor read it by its id. The test binary runs itself as nobody
// (needs root) to look.
func TestOtherUserCannotRead(t *testing.T) {
	if v := os.Getenv("LIFEBOAT_KEYRING_LOOK"); v != "" {
		name, idText, _ := strings.Cut(v, " ")
		c := &Cache{}
		var b strings.Builder
		if got := c.Get(name); got != nil {
			b.WriteString("found " + string(got) + ";")
		}
		id, _ := strconv.Atoi(idText)
		buf := make([]byte, 64)
		if n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0); err == nil {
			b.WriteString("read " + string(buf[:n]) + ";")
		} else if !errors.Is(err, unix.EACCES) {
			b.WriteString("read by id: " + err.Error() + ";")
		}
		os.Stdout.WriteString(b.String() + "done")
		return
	}
	requireKeyring(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	c := openCache(t, time.Minute)
	name := testName()
	c.Put(name, []byte("secret"))
	t.Cleanup(func() { clearEntry(name) })
	id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", name, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the test binary that nobody may run: go test's own
	// directory is its user's alone.
	dir, err := os.MkdirTemp("", "keyring-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "keyring.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	look := func(cred *syscall.Credential) string {
		cmd := exec.Command(bin, "-test.run=^TestOtherUserCannotRead$")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LIFEBOAT_KEYRING_LOOK="+name+" "+strconv.Itoa(id))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("running as %v: %v", cred, err)
		}
		got, _, _ := strings.Cut(string(out), "done")
		return got
	}
	if got := look(&syscall.Credential{Uid: 65534, Gid: 65534}); got != "" {
		t.Fatalf("another user's process: %q, want neither found nor read", got)
	}
	if got := look(nil); got != "found secret;read secret;" {
		t.Fatalf("the same user's process: %q, want the entry found and read", got)
	}
}

// roomFor leaves half of the user's key quota to other programs.
func TestRoomFor(t *testing.T) {
	if _, err := os.Stat("/proc/key-users"); err != nil {
		t.Skipf("no /proc/key-users: %v", err)
	}
	if !roomFor(45+72) && os.Geteuid() == 0 {
		t.Fatal("root's quota (a million keys by default) has no room for one entry")
	}
	if roomFor(1 << 40) {
		t.Fatal("room for a terabyte entry")
	}
}

// clearEntry drops the entry named name.
func clearEntry(name string) {
	if id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", name, 0); err == nil {
		_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
	}
}
