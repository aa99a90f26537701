// Package sshdtest runs a real OpenSSH server for tests: on 127.0.0.1, as
// the current user, with its own host key, authorized_keys and config. The
// SSH adapter's tests and the recovery acceptance test use it; a test is
// skipped when /usr/sbin/sshd is not installed.
package sshdtest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Path is the sshd binary used.
const Path = "/usr/sbin/sshd"

// Server is a running sshd.
type Server struct {
	Addr      string     // host:port it listens on
	HostKey   ssh.Signer // its host key
	ClientKey ssh.Signer // the one key it accepts
	cmd       *exec.Cmd
	done      chan struct{}
	mu        sync.Mutex
	log       bytes.Buffer
}

// NewKey returns a new ed25519 signer and its private key in PEM.
func NewKey(t testing.TB) (ssh.Signer, []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, pem.EncodeToMemory(block)
}

// FreeAddr returns a 127.0.0.1 address nothing listens on (now).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Start starts sshd on addr ("" picks a free port) with a new host key,
// accepting clientKey, and waits until it logs that it listens. It is
// stopped when the test ends.
func Start(t testing.TB, addr string, clientKey ssh.Signer) *Server {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		t.Skipf("%s not installed (apt-get install openssh-server); the SSH adapter is tested only against a real sshd", Path)
	}
	if os.Geteuid() == 0 {
		// sshd started by root insists on its privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if addr == "" {
		addr = FreeAddr(t)
	}
	host, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	s := &Server{Addr: addr, ClientKey: clientKey, done: make(chan struct{})}
	var hostPEM []byte
	s.HostKey, hostPEM = NewKey(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hk := write("host_ed25519", hostPEM)
	ak := write("authorized_keys", ssh.MarshalAuthorizedKey(clientKey.PublicKey()))
	cfg := write("sshd_config", fmt.Appendf(nil, `ListenAddress %s
Port %s
HostKey %s
AuthorizedKeysFile %s
PidFile none
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
LogLevel INFO
`, host, port, hk, ak))
	s.cmd = exec.Command(Path, "-D", "-e", "-f", cfg)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), "Server listening on") {
				signalled = true
				close(ready)
			}
		}
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.Stop)
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("sshd exited before listening:\n%s", s.Logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("sshd did not listen within 30 s:\n%s", s.Logs())
	}
	return s
}

// Logs returns what sshd logged so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Stop kills sshd and waits for it (and its log reader) to finish.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// KnownHosts writes a known_hosts file pinning key for addr.
func KnownHosts(t testing.TB, addr string, key ssh.PublicKey) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, key) + "\n"
	if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
