package tartree

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

func open(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRoundTrip: a rich tree written and extracted keeps modes (setuid,
// setgid, sticky), mtimes, symlinks, hard links and fifos.
func TestRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	ft := providertest.RichTree(t, src, true)
	var buf bytes.Buffer
	if err := Write(context.Background(), open(t, src), &buf, WriteOptions{Where: "src"}); err != nil {
		t.Fatal(err)
	}
	if err := Extract(context.Background(), &buf, open(t, dst), ExtractOptions{Where: "dst"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dst, "ro"), 0o755) })
	ft.Xattrs, ft.Owners = false, false
	providertest.CompareTrees(t, src, dst, providers.FileSupport{HardLinks: true, Fifos: true}, ft)
}

// TestExtractRefusesEscapes: names and link targets that leave the tree,
// and devices, are refused by name; nothing lands outside.
func TestExtractRefusesEscapes(t *testing.T) {
	cases := []struct {
		name string
		hdrs []tar.Header
		want string
	}{
		{"dotdot", []tar.Header{{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644}}, "../evil"},
		{"absolute", []tar.Header{{Name: "/tmp/evil", Typeflag: tar.TypeReg, Mode: 0o644}}, "/tmp/evil"},
		{"hard link out", []tar.Header{{Name: "l", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}}, "l"},
		{"through a symlink", []tar.Header{{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."}, {Name: "up/evil", Typeflag: tar.TypeReg, Mode: 0o644}}, "up/evil"},
		{"device", []tar.Header{{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}}, "null"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outer := t.TempDir()
			dst := filepath.Join(outer, "tree")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range c.hdrs {
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
			}
			tw.Close()
			err := Extract(context.Background(), &buf, open(t, dst), ExtractOptions{Where: "the mirror"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Extract = %v, want a refusal naming %s", err, c.want)
			}
			if _, err := os.Lstat(filepath.Join(outer, "evil")); err == nil {
				t.Fatal("an entry landed outside the tree")
			}
		})
	}
}
