package ssh

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

func setup(t *testing.T) (*sshd, Config) {
	client, _ := newKey(t)
	s := startSSHD(t, "", client)
	root := filepath.Join(t.TempDir(), "instances")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return s, s.config(t, root)
}

func harness(t *testing.T, cfg Config, limit func(hostSupport) hostSupport) providertest.Harness {
	return providertest.Harness{
		New: func(t *testing.T) providers.Provider {
			p := mustNew(t, cfg)
			p.limitHost = limit
			return p
		},
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) {
			// The "host" is this machine: remove the directory on it directly.
			if err := os.RemoveAll(filepath.Join(cfg.Root, string(id))); err != nil {
				t.Fatal(err)
			}
		},
		Unreachable: func(t *testing.T) providers.Provider {
			down := cfg
			down.Addr = freeAddr(t) // nothing listens there
			return mustNew(t, down)
		},
		Absent: "never-created",
		Peek:   func(t *testing.T) string { return providertest.Listing(t, cfg.Root) },
		DenyWrites: func(t *testing.T) string {
			staging := filepath.Join(cfg.Root, stagingDir)
			if err := os.MkdirAll(staging, 0o755); err != nil {
				t.Fatal(err)
			}
			if !providertest.DenyWrites(t, staging) {
				return ""
			}
			return staging
		},
	}
}

func TestConformance(t *testing.T) {
	_, cfg := setup(t)
	providertest.Run(t, harness(t, cfg, nil))
}

// TestHostWithoutTools: on a host lacking GNU tar, find or getfattr,
// FileSupport says less and the round trip keeps exactly that; without
// GNU tar, WriteFiles falls back to SFTP file by file.
func TestHostWithoutTools(t *testing.T) {
	_, cfg := setup(t)
	for _, c := range []struct {
		name  string
		limit func(hostSupport) hostSupport
		want  providers.FileSupport
		all   bool // the whole file suite (another write path), else fidelity alone
	}{
		{"NoTar", func(h hostSupport) hostSupport { h.tar = false; return h },
			providers.FileSupport{HardLinks: true}, true}, // hardlink@openssh.com
		{"NoTarNoSFTPLinks", func(h hostSupport) hostSupport { h.tar, h.sftpLinks = false, false; return h },
			providers.FileSupport{}, false},
		{"NoFindNoGetfattr", func(h hostSupport) hostSupport { h.find, h.getfattr = false, false; return h },
			providers.FileSupport{Fifos: true, Ownership: os.Geteuid() == 0}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := harness(t, cfg, c.limit)
			if got := providertest.Support(t, h.New(t)); got != c.want {
				t.Fatalf("FileSupport = %+v, want %+v", got, c.want)
			}
			if c.all {
				providertest.RunFiles(t, h)
			} else {
				providertest.Fidelity(t, h)
			}
		})
	}
}

// TestMirrorKeepsLinksFifosXattrs: the capture side. A tree made on the
// host (hard links, a fifo, user.* xattrs, setuid/setgid/sticky, owners)
// is mirrored with all of them, and later changes to each are followed
// without copying unchanged files again.
func TestMirrorKeepsLinksFifosXattrs(t *testing.T) {
	_, cfg := setup(t)
	p := mustNew(t, cfg)
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	t.Cleanup(func() { _ = p.Destroy(ctx, id) })
	keep, err := p.FileSupport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !keep.HardLinks || !keep.Fifos {
		t.Fatalf("FileSupport on a host with GNU tar and find = %+v", keep)
	}
	if !keep.Xattrs {
		t.Logf("no xattrs here (getfattr missing or the filesystem refuses them): FileSupport %+v", keep)
	}
	dir := filepath.Join(cfg.Root, string(id))
	ft := providertest.RichTree(t, dir, true)
	m := read(t, p, id)
	providertest.CompareTrees(t, dir, m, keep, ft)
	unchanged := inode(t, filepath.Join(m, "bin/suid"))

	// Changes on the host: c-link becomes a separate copy (same size and
	// mtime), a new pair of links appears, attributes change, the fifo
	// becomes a file and a new fifo appears.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "c-link"))
	must(err)
	must(os.Remove(filepath.Join(dir, "c-link")))
	must(os.WriteFile(filepath.Join(dir, "c-link"), []byte("shared by three names\n"), 0o640))
	must(os.Chtimes(filepath.Join(dir, "c-link"), fi.ModTime(), fi.ModTime()))
	must(os.WriteFile(filepath.Join(dir, "pair-1"), []byte("pair"), 0o644))
	must(os.Link(filepath.Join(dir, "pair-1"), filepath.Join(dir, "x", "pair-2")))
	if ft.Xattrs {
		must(unix.Setxattr(filepath.Join(dir, "x/attr.txt"), "user.lifeboat.bin", []byte("changed"), 0))
		must(unix.Removexattr(filepath.Join(dir, "x/attr.txt"), "user.lifeboat.empty"))
		must(unix.Removexattr(filepath.Join(dir, "x"), "user.lifeboat.dir"))
		must(unix.Setxattr(filepath.Join(dir, "pair-1"), "user.lifeboat.pair", []byte("p"), 0))
	}
	must(os.Remove(filepath.Join(dir, "pipe")))
	must(os.WriteFile(filepath.Join(dir, "pipe"), []byte("now a file"), 0o600))
	providertest.MakeFifo(t, filepath.Join(dir, "x", "fifo2"), 0o600)
	old := time.Now().Add(-time.Hour) // out of the racy window
	for _, rel := range []string{"pipe", "pair-1", "x/fifo2", "x", "."} {
		must(os.Chtimes(filepath.Join(dir, rel), old, old))
	}
	m = read(t, p, id)
	providertest.CompareTrees(t, dir, m, keep, ft)
	if inode(t, filepath.Join(m, "bin/suid")) != unchanged {
		t.Fatal("an unchanged file was transferred again")
	}
}

// TestMirrorPermissionRefused: a file on the host the SSH user cannot
// read fails ReadFiles with KindPermission naming it.
func TestMirrorPermissionRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file: needs a non-root run")
	}
	_, cfg := setup(t)
	p := mustNew(t, cfg)
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	t.Cleanup(func() { _ = p.Destroy(ctx, id) })
	dir := filepath.Join(cfg.Root, string(id))
	providertest.Tree(t, dir, "p")
	secret := filepath.Join(dir, "src", "secret")
	if err := os.WriteFile(secret, []byte("k"), 0o000); err != nil {
		t.Fatal(err)
	}
	_, err := p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles of an unreadable file", err, providers.KindPermission)
	if !strings.Contains(err.Error(), "src/secret") {
		t.Fatalf("error does not name the file: %v", err)
	}
	t.Log(err)
}

func TestStoppedSSHDIsUnavailable(t *testing.T) {
	s, cfg := setup(t)
	p := mustNew(t, cfg)
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	s.stop()
	_, err := p.Inspect(ctx, id)
	providertest.WantKind(t, "Inspect with sshd stopped", err, providers.KindUnavailable)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("not a connection refusal: %v", err)
	}
	_, err = p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles with sshd stopped", err, providers.KindUnavailable)
	providertest.WantKind(t, "Destroy with sshd stopped", p.Destroy(ctx, id), providers.KindUnavailable)
}

// TestTimeoutIsUnavailable: a host that accepts TCP but never speaks SSH.
func TestTimeoutIsUnavailable(t *testing.T) {
	_, cfg := setup(t)
	l, err := silentListener(t)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = l
	cfg.DialTimeout = 200 * time.Millisecond
	_, err = mustNew(t, cfg).Inspect(context.Background(), "ws")
	providertest.WantKind(t, "Inspect of a silent host", err, providers.KindUnavailable)
}

func TestWrongClientKeyIsUnauthorized(t *testing.T) {
	_, cfg := setup(t)
	other, _ := newKey(t)
	cfg.Signers = []ssh.Signer{other}
	cfg.KeyFile = "/etc/lifeboat/other.key"
	_, err := mustNew(t, cfg).Inspect(context.Background(), "ws")
	providertest.WantKind(t, "Inspect with a wrong client key", err, providers.KindUnauthorized)
	if !strings.Contains(err.Error(), "(auth)") {
		t.Fatalf("error does not say authentication failed: %v", err)
	}
	// The message names the key offered, the user and host, and what to do.
	for _, want := range []string{"key_file /etc/lifeboat/other.key", ssh.FingerprintSHA256(other.PublicKey()), "for user " + cfg.User,
		cfg.User + "@" + cfg.Addr, "authorized_keys", "set key_file and user"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}

// TestKnownHostsIsReadAtEveryConnection: a known_hosts file fixed after a
// host-key mismatch is used from the next connection on, by the same
// provider (serve need not restart); a file made unreadable is refused
// by name.
func TestKnownHostsIsReadAtEveryConnection(t *testing.T) {
	client, _ := newKey(t)
	s := startSSHD(t, "", client)
	cfg := s.config(t, t.TempDir()) // known_hosts holds this sshd's key
	s.stop()
	s2 := startSSHD(t, s.addr, client) // same address, a new host key
	p := mustNew(t, cfg)
	ctx := context.Background()
	_, err := p.Inspect(ctx, "ws")
	providertest.WantKind(t, "Inspect after the host key changed", err, providers.KindUnauthorized)
	if !strings.Contains(err.Error(), "host-key-mismatch") {
		t.Fatalf("error does not name the host key problem: %v", err)
	}
	fixed, err := os.ReadFile(s2.knownHosts(t, s2.hostKey.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.KnownHosts, fixed, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Inspect(ctx, "ws"); err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect after known_hosts was fixed = %+v, %v", st, err)
	}
	if err := os.WriteFile(cfg.KnownHosts, []byte("not a known_hosts line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = p.Inspect(ctx, "ws")
	providertest.WantKind(t, "Inspect with a malformed known_hosts", err, providers.KindUnauthorized)
	if !strings.Contains(err.Error(), cfg.KnownHosts) || !strings.Contains(err.Error(), "(known-hosts)") {
		t.Fatalf("error does not name known_hosts: %v", err)
	}
}

func TestRemovedDirectoryIsMissing(t *testing.T) {
	_, cfg := setup(t)
	p := mustNew(t, cfg)
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	if err := os.RemoveAll(filepath.Join(cfg.Root, string(id))); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect after removal = %+v, %v", st, err)
	}
	// The whole root gone is an outage (an unmounted disk), not Missing.
	if err := os.RemoveAll(cfg.Root); err != nil {
		t.Fatal(err)
	}
	_, err := p.Inspect(ctx, id)
	providertest.WantKind(t, "Inspect with the root gone", err, providers.KindUnavailable)
}

func TestHostKeyChangedIsRefused(t *testing.T) {
	client, _ := newKey(t)
	s := startSSHD(t, "", client)
	root := t.TempDir()
	cfg := s.config(t, root) // known_hosts holds this sshd's key
	s.stop()
	// Same address, a new host key: what a reinstall or a man in the middle looks like.
	s2 := startSSHD(t, s.addr, client)
	ctx := context.Background()
	_, err := mustNew(t, cfg).Inspect(ctx, "ws")
	providertest.WantKind(t, "Inspect after the host key changed", err, providers.KindUnauthorized)
	if !strings.Contains(err.Error(), "host-key-mismatch") || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("error does not name the host key problem: %v", err)
	}
	pinned := cfg
	pinned.KnownHosts, pinned.HostKey = "", s.hostKey.PublicKey()
	_, err = mustNew(t, pinned).Inspect(ctx, "ws")
	providertest.WantKind(t, "Inspect with a stale pinned key", err, providers.KindUnauthorized)
	if !strings.Contains(err.Error(), "pinned") {
		t.Fatalf("error does not name the pinned key: %v", err)
	}
	// A known_hosts file that does not know this host at all.
	unknown := cfg
	other, _ := newKey(t)
	unknown.KnownHosts = (&sshd{addr: "127.0.0.1:1"}).knownHosts(t, other.PublicKey())
	_, err = mustNew(t, unknown).Inspect(ctx, "ws")
	providertest.WantKind(t, "Inspect of an unknown host", err, providers.KindUnauthorized)
	if !strings.Contains(err.Error(), "host-key-unknown") {
		t.Fatalf("error does not say the host is unknown: %v", err)
	}
	// With the right key it works.
	ok := cfg
	ok.KnownHosts = s2.knownHosts(t, s2.hostKey.PublicKey())
	if st, err := mustNew(t, ok).Inspect(ctx, "ws"); err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect with the new key = %+v, %v", st, err)
	}
}

func TestNewRefusesUncheckedHostKeys(t *testing.T) {
	k, _ := newKey(t)
	base := Config{Addr: "h:22", User: "u", Signers: []ssh.Signer{k}, Root: "/srv/ws", CacheDir: t.TempDir()}
	if _, err := New(base); err == nil || !strings.Contains(err.Error(), "host keys are always checked") {
		t.Fatalf("New without a host key check: %v", err)
	}
	both := base
	both.KnownHosts, both.HostKey = "/dev/null", k.PublicKey()
	if _, err := New(both); err == nil {
		t.Fatal("New with both known_hosts and a pinned key")
	}
	rel := base
	rel.HostKey, rel.Root = k.PublicKey(), "relative"
	if _, err := New(rel); err == nil {
		t.Fatal("New with a relative root")
	}
}

// TestMirrorIsIncremental: a second ReadFiles copies only what changed,
// deletes what vanished and follows type changes.
func TestMirrorIsIncremental(t *testing.T) {
	_, cfg := setup(t)
	p := mustNew(t, cfg)
	id := providertest.MustCreate(t, p, "k")
	dir := filepath.Join(cfg.Root, string(id))
	providertest.Tree(t, dir, "v1")
	old := time.Now().Add(-time.Hour)
	touchAll(t, dir, old) // out of the racy window
	m := read(t, p, id)
	if got, want := providertest.Listing(t, m), providertest.Listing(t, dir); got != want {
		t.Fatalf("first mirror:\n%s\nwant:\n%s", got, want)
	}
	unchanged := inode(t, filepath.Join(m, "src/main.go"))
	// Change one file (same size, new mtime), remove one, turn a file into
	// a directory, add a symlink.
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, "README"), old.Add(time.Minute), old.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "src/deep")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "ro.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "ro.txt", "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	m2 := read(t, p, id)
	if got, want := providertest.Listing(t, m2), providertest.Listing(t, dir); got != want {
		t.Fatalf("second mirror:\n%s\nwant:\n%s", got, want)
	}
	if inode(t, filepath.Join(m2, "src/main.go")) != unchanged {
		t.Fatal("an unchanged file was transferred again")
	}
	if fi, err := os.Lstat(filepath.Join(m2, "passwd")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("remote symlink not kept as a symlink: %v", err)
	}
}

func read(t *testing.T, p *Provider, id providers.InstanceID) string {
	t.Helper()
	f, err := p.ReadFiles(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	dir := f.Dir()
	_ = f.Close()
	return dir
}

func touchAll(t *testing.T, dir string, when time.Time) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
