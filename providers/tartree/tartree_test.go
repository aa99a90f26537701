package tartree

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
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

// TestExtractRefusesEscapes: names and link targets that leave the tree
// are refused by name; nothing lands outside.
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
		{"device through a symlink", []tar.Header{{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."}, {Name: "up/evil", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}}, "up/evil"},
		{"absolute symlink then a file through it", []tar.Header{{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, {Name: "up/evil", Typeflag: tar.TypeReg, Mode: 0o644}}, "up/evil"},
		{"hard link through a symlink", []tar.Header{{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."}, {Name: "l", Typeflag: tar.TypeLink, Linkname: "up/evil-target"}}, "l"},
		{"directory through a symlink", []tar.Header{{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."}, {Name: "up/evil/", Typeflag: tar.TypeDir, Mode: 0o755}}, "up/evil"},
		{"fifo through a symlink", []tar.Header{{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."}, {Name: "up/evil", Typeflag: tar.TypeFifo, Mode: 0o644}}, "up/evil"},
		{"file over a symlink", []tar.Header{{Name: "evil", Typeflag: tar.TypeSymlink, Linkname: "../evil"}, {Name: "evil", Typeflag: tar.TypeReg, Mode: 0o644}}, "evil"},
		{"dotdot inside", []tar.Header{{Name: "a/../../evil", Typeflag: tar.TypeReg, Mode: 0o644}}, "a/../../evil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outer := t.TempDir()
			dst := filepath.Join(outer, "tree")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outer, "evil-target"), []byte("outside"), 0o644); err != nil {
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

// TestExtractRefusesSparse: a PAX sparse entry (GNU.sparse.* records,
// format 1.0 as GNU tar --sparse writes it), which nothing Lifeboat reads
// produces, is refused by name: its declared size is not bounded by the
// archive's, so a tiny archive could otherwise fill the disk with zeros.
func TestExtractRefusesSparse(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// archive/tar writes no sparse records: the extended header is written
	// as a plain file, then retyped 'x' (and its checksum redone).
	var recs string
	for _, kv := range []string{"GNU.sparse.major=1", "GNU.sparse.minor=0", "GNU.sparse.name=big", "GNU.sparse.realsize=1099511627776"} {
		n := len(kv) + 3
		n = len(fmt.Sprintf("%d %s\n", n, kv))
		recs += fmt.Sprintf("%d %s\n", n, kv)
	}
	if err := tw.WriteHeader(&tar.Header{Name: "PaxHeaders/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(recs)), Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(recs)); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	hdr := buf.Bytes()[:512]
	hdr[156] = tar.TypeXHeader
	copy(hdr[148:156], "        ")
	sum := 0
	for _, b := range hdr {
		sum += int(b)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	sparseMap := "1\n0\n1\n"
	data := sparseMap + strings.Repeat("\x00", 512-len(sparseMap)) + "x"
	if err := tw.WriteHeader(&tar.Header{Name: "GNUSparseFile.0/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	// The stream really declares a 1 TiB file.
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	if h, err := tr.Next(); err != nil || h.Name != "big" || h.Size != 1<<40 {
		t.Fatalf("the crafted stream reads as %+v, %v", h, err)
	}
	dst := t.TempDir()
	err := Extract(context.Background(), &buf, open(t, dst), ExtractOptions{Where: "the mirror"})
	if err == nil || !strings.Contains(err.Error(), "big") || !strings.Contains(err.Error(), "sparse") {
		t.Fatalf("Extract = %v, want a refusal of the sparse entry big", err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "big")); err == nil && fi.Size() > 0 {
		t.Fatalf("the sparse entry was written (%d bytes)", fi.Size())
	}
}
