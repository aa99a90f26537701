package snaptest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
	"lifeboat/snapshot"
)

// UserXattrs lists p's user.* extended attributes, sorted.
func UserXattrs(t testing.TB, p string) []snapshot.Xattr {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		t.Fatal(err)
	}
	var out []snapshot.Xattr
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v := make([]byte, 64<<10)
		k, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, snapshot.Xattr{Name: name, Value: v[:k]})
	}
	slices.SortFunc(out, func(a, b snapshot.Xattr) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Dump describes every entry under root, metadata and content hash, one
// line each, for exact comparison. Sockets are left out (restore skips
// them); hard links show as a shared inode number relative to the tree.
// When times is false, directory mtimes are left out (they change when
// entries are added).
func Dump(t testing.TB, root string, times bool) string {
	t.Helper()
	var b strings.Builder
	inodes := map[uint64]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		typ := st.Mode & unix.S_IFMT
		if typ == unix.S_IFSOCK || typ == unix.S_IFCHR || typ == unix.S_IFBLK {
			return nil // never restored
		}
		ino, ok := inodes[st.Ino]
		if !ok {
			ino = len(inodes)
			inodes[st.Ino] = ino
		}
		fmt.Fprintf(&b, "%q type=%o mode=%04o owner=%d:%d", rel, typ, st.Mode&0o7777, st.Uid, st.Gid)
		if typ != unix.S_IFDIR || times {
			fmt.Fprintf(&b, " mtime=%d", st.Mtim.Nano())
		}
		switch typ {
		case unix.S_IFREG:
			fmt.Fprintf(&b, " ino=%d size=%d sha=%x", ino, st.Size, fileHash(t, p))
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %q", target)
		}
		if typ != unix.S_IFLNK {
			for _, x := range UserXattrs(t, p) {
				fmt.Fprintf(&b, " %s=%q", x.Name, x.Value)
			}
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// fileHash hashes a file's logical content in 1 MiB blocks; an
// all-zero block hashes the same whether it is a hole or written zeros,
// and holes are not read (a 1 GiB sparse file costs a few reads).
func fileHash(t testing.TB, p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const bs = 1 << 20
	h := sha256.New()
	buf := make([]byte, bs)
	for off := int64(0); off < fi.Size(); off += bs {
		n := min(bs, fi.Size()-off)
		if !osutil.IsHole(int(f.Fd()), off, n) {
			if _, err := f.ReadAt(buf[:n], off); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:n], make([]byte, n)) {
				fmt.Fprintf(h, "data %d:", off)
				h.Write(buf[:n])
				continue
			}
		}
		fmt.Fprintf(h, "zeros %d+%d;", off, n)
	}
	return h.Sum(nil)
}

// Leftovers lists .lifeboat-* names in dir.
func Leftovers(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".lifeboat-") {
			out = append(out, e.Name())
		}
	}
	return out
}
