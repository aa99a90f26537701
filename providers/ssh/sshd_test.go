package ssh

import (
	"os/user"
	"testing"

	"golang.org/x/crypto/ssh"

	"lifeboat/providers/providertest"
	"lifeboat/providers/ssh/sshdtest"
)

// sshd is a real OpenSSH server run by a test (sshdtest.Server), with the
// names the adapter's tests use.
type sshd struct {
	srv       *sshdtest.Server
	addr      string
	hostKey   ssh.Signer
	clientKey ssh.Signer
}

func newKey(t *testing.T) (ssh.Signer, []byte) { return sshdtest.NewKey(t) }

func freeAddr(t *testing.T) string { return sshdtest.FreeAddr(t) }

// startSSHD starts sshd on addr ("" picks a free port) with a new host key
// and waits until it logs that it listens.
func startSSHD(t *testing.T, addr string, clientKey ssh.Signer) *sshd {
	t.Helper()
	s := sshdtest.Start(t, addr, clientKey)
	return &sshd{srv: s, addr: s.Addr, hostKey: s.HostKey, clientKey: clientKey}
}

// stop kills sshd and waits for it (and its log reader) to finish.
func (s *sshd) stop() { s.srv.Stop() }

// knownHosts writes a known_hosts file pinning key for s's address.
func (s *sshd) knownHosts(t *testing.T, key ssh.PublicKey) string {
	t.Helper()
	return sshdtest.KnownHosts(t, s.addr, key)
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
	return providertest.MustNew(t, New, cfg)
}
