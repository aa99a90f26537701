package ssh

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
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

const sshdPath = "/usr/sbin/sshd"

// sshd is a real OpenSSH server run by a test on 127.0.0.1, as the current
// user, with its own host key, authorized_keys and config.
type sshd struct {
	dir       string
	addr      string
	hostKey   ssh.Signer
	clientKey ssh.Signer
	cmd       *exec.Cmd
	done      chan struct{}
	mu        sync.Mutex
	log       bytes.Buffer
}

func newKey(t *testing.T) (ssh.Signer, []byte) {
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startSSHD starts sshd on addr ("" picks a free port) with a new host key
// and waits until it logs that it listens.
func startSSHD(t *testing.T, addr string, clientKey ssh.Signer) *sshd {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		t.Skipf("%s not installed (apt-get install openssh-server); the SSH adapter is tested only against a real sshd", sshdPath)
	}
	if os.Geteuid() == 0 {
		// sshd started by root insists on its privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if addr == "" {
		addr = freeAddr(t)
	}
	host, port, _ := net.SplitHostPort(addr)
	s := &sshd{dir: t.TempDir(), addr: addr, clientKey: clientKey, done: make(chan struct{})}
	var hostPEM []byte
	s.hostKey, hostPEM = newKey(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(s.dir, name)
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
	s.cmd = exec.Command(sshdPath, "-D", "-e", "-f", cfg)
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
	t.Cleanup(s.stop)
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("sshd exited before listening:\n%s", s.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("sshd did not listen within 30 s:\n%s", s.logs())
	}
	return s
}

func (s *sshd) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop kills sshd and waits for it (and its log reader) to finish.
func (s *sshd) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// knownHosts writes a known_hosts file pinning key for s's address.
func (s *sshd) knownHosts(t *testing.T, key ssh.PublicKey) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(s.addr)}, key) + "\n"
	if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// config is a working Config for s with instances under root.
func (s *sshd) config(t *testing.T, root string) Config {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Addr:       s.addr,
		User:       u.Username,
		Signers:    []ssh.Signer{s.clientKey},
		KnownHosts: s.knownHosts(t, s.hostKey.PublicKey()),
		Root:       root,
		CacheDir:   t.TempDir(),
	}
}

func mustNew(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
