package dockertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are the PEM files of one side of a TLS connection.
type TLSFiles struct{ CA, Cert, Key string }

// StartTLS is Start with the daemon also listening on tcp://127.0.0.1
// with --tlsverify: Daemon.TCPHost, the files of a client it accepts
// (Daemon.ClientTLS) and of one whose certificate another CA signed
// (Daemon.RogueTLS), which it refuses.
func StartTLS(t testing.TB) *Daemon {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	ca, caKey := newCA(t, "lifeboat test CA")
	server := issue(t, dir, "server", ca, caKey, x509.ExtKeyUsageServerAuth)
	client := issue(t, dir, "client", ca, caKey, x509.ExtKeyUsageClientAuth)
	rogueCA, rogueKey := newCA(t, "someone else's CA")
	rogue := issue(t, dir, "rogue", rogueCA, rogueKey, x509.ExtKeyUsageClientAuth)
	rogue.CA = client.CA // it trusts the daemon; the daemon does not trust it
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return start(t, func(d *Daemon) {
		d.TCPHost, d.ClientTLS, d.RogueTLS = "tcp://"+addr, client, rogue
		d.extra = []string{"--host", d.TCPHost, "--tlsverify", "--tlscacert", server.CA, "--tlscert", server.Cert, "--tlskey", server.Key}
	})
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue writes <name>-ca.pem, <name>-cert.pem and <name>-key.pem: a
// certificate for 127.0.0.1 signed by ca.
func issue(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{CA: filepath.Join(dir, name+"-ca.pem"), Cert: filepath.Join(dir, name+"-cert.pem"), Key: filepath.Join(dir, name+"-key.pem")}
	for _, w := range []struct {
		path, typ string
		der       []byte
	}{{f.CA, "CERTIFICATE", ca.Raw}, {f.Cert, "CERTIFICATE", der}, {f.Key, "EC PRIVATE KEY", kb}} {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
