package keyring

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testName is a fresh entry name, so that parallel runs never meet.
func testName(t *testing.T) string {
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

// An entry comes back from a later Get, replaced by a later Put, with the
// cache's timeout and permissions for its possessor only; a name never
// kept reads as nil.
func TestPutGet(t *testing.T) {
	requireKeyring(t)
	c := New(3 * time.Minute)
	name := testName(t)
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
}

// A process of another user cannot find the entry. The test binary runs
// itself as nobody (needs root) to look.
func TestOtherUserCannotRead(t *testing.T) {
	if name := os.Getenv("LIFEBOAT_KEYRING_LOOK"); name != "" {
		if got := New(time.Minute).Get(name); got != nil {
			os.Stdout.WriteString("read " + string(got))
		} else {
			os.Stdout.WriteString("nothing")
		}
		return
	}
	requireKeyring(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	c := New(time.Minute)
	name := testName(t)
	c.Put(name, []byte("secret"))
	t.Cleanup(func() { clearEntry(name) })
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
	cmd := exec.Command(bin, "-test.run=^TestOtherUserCannotRead$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LIFEBOAT_KEYRING_LOOK="+name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running as nobody: %v", err)
	}
	if !bytes.HasPrefix(out, []byte("nothing")) {
		t.Fatalf("another user's process got %q", out)
	}
	// The same user's next process does find it.
	cmd = exec.Command(bin, "-test.run=^TestOtherUserCannotRead$")
	cmd.Env = append(os.Environ(), "LIFEBOAT_KEYRING_LOOK="+name)
	if out, err := cmd.Output(); err != nil || !bytes.HasPrefix(out, []byte("read secret")) {
		t.Fatalf("the same user's process: %q, %v; want the entry", out, err)
	}
}

// clearEntry drops the entry named name.
func clearEntry(name string) {
	if id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", name, 0); err == nil {
		(&Cache{}).remove(id)
	}
}
