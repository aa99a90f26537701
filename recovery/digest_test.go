package recovery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"lifeboat/internal/seedtest"
	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/providers/providertest"
	lbssh "lifeboat/providers/ssh"
	"lifeboat/providers/ssh/sshdtest"
)

// digestRoundTrip writes src into a new instance of p and checks that the
// staging tree (when readable here) and, after Switch, the ReadFiles view
// have the digest of src, with what p says it keeps.
func digestRoundTrip(t *testing.T, p providers.Provider, src string, stagingReadable bool) {
	t.Helper()
	ctx := context.Background()
	keep := fileSupport(ctx, p)
	want, err := treeDigest(src, keep)
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(ctx, id) })
	staging, err := p.WriteFiles(ctx, id, src)
	if err != nil {
		t.Fatal(err)
	}
	if stagingReadable {
		if got, err := treeDigest(staging, keep); err != nil || got != want {
			t.Fatalf("staging digest %s, %v; want %s (FileSupport %+v)", got, err, want, keep)
		}
	}
	if err := p.Switch(ctx, id, staging); err != nil {
		t.Fatal(err)
	}
	f, err := p.ReadFiles(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := treeDigest(f.Dir(), keep); err != nil || got != want {
		t.Fatalf("digest after the switch %s, %v; want %s (FileSupport %+v)", got, err, want, keep)
	}
}

// TestDigestFaithfulCopyLocal: a tree with hard links, xattrs, a fifo, a
// sparse file and setuid/setgid/sticky modes has one digest before and
// after the local provider copies it.
func TestDigestFaithfulCopyLocal(t *testing.T) {
	p := local.New(t.TempDir())
	src := t.TempDir()
	providertest.RichTree(t, src, true)
	if keep := fileSupport(context.Background(), p); !keep.HardLinks || !keep.Fifos {
		t.Fatalf("local FileSupport = %+v", keep)
	}
	digestRoundTrip(t, p, src, true)
}

// TestDigestFaithfulCopySSH: the same through the SSH adapter against a
// real sshd, compared through its ReadFiles mirror.
func TestDigestFaithfulCopySSH(t *testing.T) {
	client, _ := sshdtest.NewKey(t)
	srv := sshdtest.Start(t, "", client)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	p, err := lbssh.New(lbssh.Config{Addr: srv.Addr, User: u.Username, Signers: []ssh.Signer{client},
		KnownHosts: sshdtest.KnownHosts(t, srv.Addr, srv.HostKey.PublicKey()), Root: t.TempDir(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	keep := fileSupport(context.Background(), p)
	t.Logf("ssh FileSupport: %+v", keep)
	src := t.TempDir()
	providertest.RichTree(t, src, keep.Fifos)
	digestRoundTrip(t, p, src, false)
}

// TestDigestRandomTreesLocal: random trees (files, hard links across
// directories, symlinks, fifos, xattrs, modes) copied by the local
// provider keep their digest. The seed is logged; -seed replays.
func TestDigestRandomTreesLocal(t *testing.T) {
	rng := seedtest.Rand(t)
	p := local.New(t.TempDir())
	for i := range 5 {
		src := t.TempDir()
		randomTree(t, rng, src)
		t.Run(fmt.Sprint(i), func(t *testing.T) { digestRoundTrip(t, p, src, true) })
	}
}

func randomTree(t *testing.T, rng *rand.Rand, dir string) {
	t.Helper()
	dirs := []string{dir}
	var files []string
	xattrs := providertest.UserXattrs(t, dir)
	for range 40 {
		parent := dirs[rng.IntN(len(dirs))]
		name := filepath.Join(parent, fmt.Sprintf("e%d", rng.IntN(1000)))
		if _, err := os.Lstat(name); err == nil {
			continue
		}
		var err error
		switch k := rng.IntN(10); {
		case k < 2:
			if err = os.Mkdir(name, 0o755); err == nil {
				dirs = append(dirs, name)
			}
		case k < 6:
			body := make([]byte, rng.IntN(5000))
			for i := range body {
				body[i] = byte(rng.IntN(256))
			}
			if err = os.WriteFile(name, body, 0o644); err == nil {
				files = append(files, name)
				err = os.Chmod(name, os.FileMode(rng.IntN(0o1000))|0o600|[]os.FileMode{0, os.ModeSetuid, os.ModeSetgid}[rng.IntN(3)])
			}
			if err == nil && xattrs && rng.IntN(2) == 0 {
				err = unix.Setxattr(name, fmt.Sprintf("user.r%d", rng.IntN(3)), []byte{byte(rng.IntN(256)), 0}, 0)
			}
		case k < 8 && len(files) > 0:
			err = os.Link(files[rng.IntN(len(files))], name)
		case k < 9:
			err = os.Symlink(fmt.Sprintf("../t%d", rng.IntN(9)), name)
		default:
			err = unix.Mkfifo(name, 0o640)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDigestSeesWhatIsKept: each part a provider keeps moves the digest
// when it changes; what it does not keep, and times, do not.
func TestDigestSeesWhatIsKept(t *testing.T) {
	all := providers.FileSupport{HardLinks: true, Xattrs: true, Fifos: true, Sparse: true, Ownership: true}
	none := providers.FileSupport{}
	links, xattrs, fifos := providers.FileSupport{HardLinks: true}, providers.FileSupport{Xattrs: true}, providers.FileSupport{Fifos: true}
	for _, c := range []struct {
		name     string
		change   func(d string) error
		moves    []providers.FileSupport // the digest with each of these changes
		stays    []providers.FileSupport // and with each of these does not
		needXatt bool                    // needs user xattrs under t.TempDir()
	}{
		{"content", func(d string) error { return os.WriteFile(filepath.Join(d, "owned"), []byte("other"), 0o644) }, []providers.FileSupport{none, all}, nil, false},
		{"setuid bit", func(d string) error { return os.Chmod(filepath.Join(d, "bin/suid"), 0o755) }, []providers.FileSupport{none, all}, nil, false},
		{"sticky bit", func(d string) error { return os.Chmod(filepath.Join(d, "tmp"), 0o777) }, []providers.FileSupport{none, all}, nil, false},
		{"symlink target", func(d string) error {
			if err := os.Remove(filepath.Join(d, "x/to-a")); err != nil {
				return err
			}
			return os.Symlink("elsewhere", filepath.Join(d, "x/to-a"))
		}, []providers.FileSupport{none, all}, nil, false},
		{"hard link split", func(d string) error {
			b, err := os.ReadFile(filepath.Join(d, "c-link"))
			if err == nil {
				err = os.Remove(filepath.Join(d, "c-link"))
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(d, "c-link"), b, 0o640)
			}
			return err
		}, []providers.FileSupport{links}, []providers.FileSupport{none, fifos}, false},
		{"xattr value", func(d string) error {
			return unix.Setxattr(filepath.Join(d, "x/attr.txt"), "user.lifeboat.bin", []byte("changed"), 0)
		}, []providers.FileSupport{xattrs, all}, []providers.FileSupport{none, links}, true},
		{"directory xattr", func(d string) error { return unix.Removexattr(filepath.Join(d, "x"), "user.lifeboat.dir") },
			[]providers.FileSupport{xattrs}, []providers.FileSupport{none}, true},
		{"fifo removed", func(d string) error { return os.Remove(filepath.Join(d, "pipe")) },
			[]providers.FileSupport{fifos, all}, []providers.FileSupport{none, links}, false},
		{"times", func(d string) error {
			when := time.Unix(5, 0)
			return os.Chtimes(filepath.Join(d, "data/a"), when, when)
		}, nil, []providers.FileSupport{none, all}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if ft := providertest.RichTree(t, dir, true); c.needXatt && !ft.Xattrs {
				t.Skip("no user xattrs under the temporary directory")
			}
			digest := func(keep providers.FileSupport) string {
				d, err := treeDigest(dir, keep)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			before := map[providers.FileSupport]string{}
			for _, k := range append(slices.Clone(c.moves), c.stays...) {
				before[k] = digest(k)
			}
			if err := c.change(dir); err != nil {
				t.Fatal(err)
			}
			for _, k := range c.moves {
				if digest(k) == before[k] {
					t.Errorf("digest with %+v did not change", k)
				}
			}
			for _, k := range c.stays {
				if digest(k) != before[k] {
					t.Errorf("digest with %+v changed, though that is not kept", k)
				}
			}
		})
	}
}
