package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/profile/fixture"
	"lifeboat/providers/ssh/sshdtest"
)

// TestRecoverSSHWorkspaceThroughServe is the acceptance test of the host
// service: a real `lifeboat serve`, started from a config file naming an
// SSH provider instance on a real sshd, registers a workspace on that
// host, captures and parks it, sees it lost when its instance is removed,
// offers and, on approval, recovers it into a replacement on the same
// host. The replacement has what was captured: files, modes (setuid,
// sticky), mtimes, hard links, xattrs, a named pipe, symlinks and the
// browser session.
func TestRecoverSSHWorkspaceThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary and sshd")
	}
	if _, err := os.Stat(sshdtest.Path); err != nil {
		t.Skip("skipped: Debian's openssh-server is not installed here")
	}
	client, keyPEM := sshdtest.NewKey(t)
	srv := sshdtest.Start(t, "", client)
	u, err := user.Current()
	must(t, err)
	remote := t.TempDir() // the host's instance root: the host is this machine
	s := newSvcEnv(t, "")
	keyFile := filepath.Join(s.dir, "id_ed25519")
	must(t, os.WriteFile(keyFile, keyPEM, 0o600))
	host, port, _ := strings.Cut(srv.Addr, ":")
	s.addConfig(fmt.Sprintf(`
[providers.box1]
type = "ssh"
host = %q
port = %s
user = %q
key_file = %q
known_hosts = %q
root = %q

[workspaces.bot1]
park_interval = "1ns"
`, host, port, u.Username, keyFile, sshdtest.KnownHosts(t, srv.Addr, srv.HostKey.PublicKey()), remote))
	s.checkConfig()

	// The sandbox on the host: a tree with what a faithful recovery keeps.
	work := filepath.Join(remote, "bot1")
	fx := writeRecoverableTree(t, work, 7, 28)
	if err := unix.Setxattr(filepath.Join(work, "d0", "f4.txt"), "user.origin", []byte("agent run 17"), 0); err != nil {
		t.Skipf("the filesystem under the test's temp dir refuses user xattrs: %v", err)
	}
	old := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	must(t, os.Chtimes(filepath.Join(work, "d0", "f4.txt"), old, old))

	s.start()
	s.cliOK("workspace", "add", "bot1", "--provider", "box1", "--instance", "bot1")
	if rc := s.cliJSON("capture", "--workspace", "bot1"); rc["outcome"] != "captured" {
		t.Fatalf("capture over ssh: %v", rc)
	}
	must(t, os.WriteFile(filepath.Join(work, "d2", "late.txt"), []byte("written before the park"), 0o640))
	good := s.parkCaptured("over ssh")

	// Lost: the instance leaves the host (kept aside to compare with).
	want := filepath.Join(t.TempDir(), "want")
	must(t, os.Rename(work, want))
	if st := s.cliJSON("workspace", "check", "bot1"); st["state"] != "lost" {
		t.Fatalf("check: %v", st)
	}
	o := s.cliJSON("recovery", "offer", "bot1")
	if o["checkpoint"] != good || o["profile"] != true {
		t.Fatalf("offer: %v", o)
	}
	for _, n := range o["not_recoverable"].([]any) {
		if s := n.(string); strings.Contains(s, "hard links") || strings.Contains(s, "extended attributes") || strings.Contains(s, "named pipes") {
			t.Fatalf("the offer says the ssh host cannot hold what it can: %s", s)
		}
	}
	op := s.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--wait")
	if op["step"] != "recovered" {
		t.Fatalf("recovery: %v\n%s", op, s.stderr)
	}
	got := filepath.Join(remote, op["new_instance"].(string))

	// Files, modes, mtimes, symlinks, fifo: as captured, the browser
	// profile aside (capture leaves its caches and locks out).
	checkRecoveredTree(t, want, got, fx)
	buf := make([]byte, 64)
	n, err := unix.Getxattr(filepath.Join(got, "d0", "f4.txt"), "user.origin", buf)
	if err != nil || string(buf[:n]) != "agent run 17" {
		t.Fatalf("xattr: %q %v", buf[:n], err)
	}
	for _, p := range fixture.Dropped {
		if _, err := os.Lstat(filepath.Join(got, "chrome", p)); err == nil {
			t.Fatalf("%s came back, but capture leaves it out", p)
		}
	}
	w := s.cliJSON("workspace", "show", "bot1")
	if w["id"] != "bot1" || w["instance"] != op["new_instance"] || w["generation"].(float64) != 1 || w["provider"] != "box1" {
		t.Fatalf("workspace after the recovery: %v", w)
	}
	s.stop()
}
