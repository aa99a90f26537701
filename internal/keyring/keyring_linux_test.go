package keyring

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/internal/keyring/keyringtest"
	"lifeboat/internal/proctest"
)

// testName is a fresh entry name, so that parallel runs never meet.
func testName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "lifeboat:test:" + hex.EncodeToString(b)
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
	keyringtest.Require(t)
	c := openCache(t, 3*time.Minute)
	name := testName()
	if got := c.Get(name); got != nil {
		t.Fatalf("Get of a name never kept = %q, want nil", got)
	}
	c.Put(name, []byte("first"))
	t.Cleanup(func() { keyringtest.Remove(name) })
	if got := c.Get(name); string(got) != "first" {
		t.Fatalf("Get = %q, want %q", got, "first")
	}
	c.Put(name, []byte("second"))
	if got := c.Get(name); string(got) != "second" {
		t.Fatalf("Get after a second Put = %q, want %q", got, "second")
	}
	line := keyringtest.Entry(t, name)
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

// lookEnv passes TestKeyringLookAsChild its directory, whose file "look"
// says the entry's name and id and what the child must find.
const lookEnv = "LIFEBOAT_KEYRING_LOOK"

// A process of another user can neither find the entry through its own
// keyrings nor read it by its id (the test binary runs itself as nobody,
// which needs root), while the same user's next process finds and reads
// it.
func TestOtherUserCannotRead(t *testing.T) {
	keyringtest.Require(t)
	c := openCache(t, time.Minute)
	name := testName()
	c.Put(name, []byte("secret"))
	t.Cleanup(func() { keyringtest.Remove(name) })
	id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", name, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := proctest.SharedTempDir(t, 0o755)
	look := func(want string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "look"), []byte(name+" "+strconv.Itoa(id)+" "+want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	look("secret")
	proctest.RunTest(t, os.Args[0], "TestKeyringLookAsChild", []string{lookEnv + "=" + dir}, nil)
	look("nothing")
	proctest.RunTestAsNobody(t, dir, "TestKeyringLookAsChild", lookEnv)
}

// TestKeyringLookAsChild is TestOtherUserCannotRead's child: it looks for
// the entry through its own keyrings and reads it by its id.
func TestKeyringLookAsChild(t *testing.T) {
	dir := proctest.ChildEnv(t, lookEnv, "TestOtherUserCannotRead")
	b, err := os.ReadFile(filepath.Join(dir, "look"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		t.Fatalf("look file %q", b)
	}
	name, want := f[0], f[2]
	id, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	got := (&Cache{}).Get(name)
	buf := make([]byte, 64)
	n, rerr := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	switch want {
	case "secret":
		if string(got) != "secret" || rerr != nil || string(buf[:n]) != "secret" {
			t.Fatalf("the same user: Get %q, read by id %q, %v; want the entry", got, buf[:max(n, 0)], rerr)
		}
	default:
		if got != nil || !errors.Is(rerr, unix.EACCES) {
			t.Fatalf("uid %d: Get %q, read by id: %v; want nothing, and EACCES", os.Geteuid(), got, rerr)
		}
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
