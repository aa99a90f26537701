// Package dockertest runs a private Docker daemon for tests: Debian's
// dockerd as root, with its own socket, data root and exec root in a
// temporary directory, no bridge, no iptables, so it reaches no network
// and no registry; and a test image imported from a tarball of Debian's
// static busybox. The Docker adapter's tests and the service acceptance
// tests use it. A test is skipped when dockerd or busybox is missing or
// the test does not run as root, and fails instead when LIFEBOAT_CI=1.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// Paths of what the daemon needs (Debian's docker.io and busybox-static).
const (
	Dockerd = "/usr/sbin/dockerd"
	Busybox = "/bin/busybox"
)

// Image is the test image's reference.
const Image = "lifeboat-test/busybox:latest"

// Command keeps a test container running and stops at once on SIGTERM
// (a plain sleep as PID 1 ignores it, so every stop would wait 10 s).
var Command = []string{"sh", "-c", "trap 'exit 0' TERM; sleep 2147483647 & wait"}

// Daemon is a running private dockerd.
type Daemon struct {
	Dir  string // its directory: docker.sock, root/, exec/, pid, log
	Host string // unix://<Dir>/docker.sock

	// With StartTLS: the daemon's TCP address and the files of a client
	// it accepts and of one it refuses.
	TCPHost             string
	ClientTLS, RogueTLS TLSFiles

	extra []string // more dockerd flags

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Require skips t (fails it under LIFEBOAT_CI=1) unless a private daemon
// can run here.
func Require(t testing.TB) {
	t.Helper()
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "the private dockerd needs root"
	default:
		for _, p := range []string{Dockerd, Busybox} {
			if _, err := os.Stat(p); err != nil {
				why = fmt.Sprintf("%s is not installed (apt-get install docker.io busybox-static)", p)
			}
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("LIFEBOAT_CI") == "1" {
		t.Fatalf("LIFEBOAT_CI=1 but %s: the Docker adapter is tested only against a real daemon", why)
	}
	t.Skipf("skipped: %s; the Docker adapter is tested only against a real daemon", why)
}

// Start starts a private dockerd, waits until it answers, imports the
// test image, and stops it (and removes its directory) when the test
// ends, also when it fails.
func Start(t testing.TB) *Daemon {
	t.Helper()
	Require(t)
	return start(t, nil)
}

func start(t testing.TB, tune func(*Daemon)) *Daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "lbdock")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Dir: dir, Host: "unix://" + filepath.Join(dir, "docker.sock")}
	if tune != nil {
		tune(d)
	}
	t.Cleanup(func() {
		d.Stop(t)
		_ = exec.Command("umount", "-R", filepath.Join(dir, "root")).Run() // overlay mounts a killed daemon left
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
	d.Restart(t)
	if err := importImage(d.Host); err != nil {
		t.Fatalf("importing the test image: %v\n%s", err, d.Log())
	}
	return d
}

// Restart starts the daemon again after Stop (containers come back
// stopped).
func (d *Daemon) Restart(t testing.TB) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		t.Fatal("dockertest: Restart of a running daemon")
	}
	log, err := os.OpenFile(filepath.Join(d.Dir, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(Dockerd, "--host", d.Host, "--bridge", "none", "--iptables=false", "--ip6tables=false",
		"--data-root", filepath.Join(d.Dir, "root"), "--exec-root", filepath.Join(d.Dir, "exec"),
		"--pidfile", filepath.Join(d.Dir, "pid"), "--shutdown-timeout", "2")
	cmd.Args = append(cmd.Args, d.extra...)
	// What the daemon and its containerd leave in the temp directory (a
	// stack dump, containerd.PID.stacks.log, on some signals) goes into
	// the daemon's directory, which the test removes.
	cmd.Env = append(os.Environ(), "TMPDIR="+d.Dir)
	cmd.Stdout, cmd.Stderr = log, log
	// A test binary killed before its cleanups (a timeout) takes the
	// daemon with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting dockerd: %v", err)
	}
	d.cmd, d.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(d.done)
	cli, err := client.New(client.WithHost(d.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		cancel()
		if err == nil {
			return
		}
		select {
		case <-d.done:
			t.Fatalf("dockerd exited while starting:\n%s", d.Log())
		case <-time.After(100 * time.Millisecond): // polling an external server's readiness
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockerd did not answer within a minute: %v\n%s", err, d.Log())
		}
	}
}

// Stop stops the daemon (SIGTERM, then SIGKILL after 30 s) and waits for
// it; its running containers are stopped with it. Stopping a stopped
// daemon does nothing.
func (d *Daemon) Stop(t testing.TB) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Logf("dockerd did not stop within 30 s and was killed")
	}
	d.cmd = nil
}

// Log is the daemon's log so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(filepath.Join(d.Dir, "log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// Client is a client of the daemon, closed when the test ends.
func (d *Daemon) Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.WithHost(d.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// importImage imports a rootfs of busybox and its applet links as Image.
func importImage(host string) error {
	rootfs, err := busyboxRootfs()
	if err != nil {
		return err
	}
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, Image, client.ImageImportOptions{})
	if err != nil {
		return err
	}
	defer res.Close()
	out, err := io.ReadAll(res)
	if err != nil {
		return err
	}
	if strings.Contains(string(out), `"error"`) {
		return fmt.Errorf("import: %s", out)
	}
	return nil
}

// busyboxRootfs is a tarball with /bin/busybox, a symlink per applet in
// /bin, and /tmp.
func busyboxRootfs() ([]byte, error) {
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		return nil, err
	}
	list, err := exec.Command(Busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755, ModTime: now},
		{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: now},
		{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb)), ModTime: now},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(bb); err != nil {
		return nil, err
	}
	for _, a := range strings.Fields(string(list)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", ModTime: now}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
