package recovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// treeDigest is a SHA-256 over a directory tree as a provider keeps it
// (keep: what its WriteFiles keeps, see fileSupport), so that the restored
// tree and a faithful copy of it in the replacement (its staging tree, or
// after Switch its ReadFiles view) give equal digests. For every entry
// below root, in lexical order (WalkDir's), it takes the slash path, the
// type, the permission bits with setuid, setgid and sticky (not for
// symlinks), and:
//
//   - a regular file's content and size, a symlink's target;
//   - with keep.HardLinks, for a regular file sharing its inode with an
//     earlier one in the tree, that earlier path (a file linked only from
//     outside the tree looks like any other);
//   - with keep.Xattrs, the user.* attributes of regular files and
//     directories (what a snapshot captures);
//   - fifos only with keep.Fifos (a provider without them refuses them).
//
// Left out: the root directory itself (the replacement's keeps its own
// mode), sockets and devices (never copied), times (SFTP carries whole
// seconds), owners (kept only as root), holes (the content is the same).
func treeDigest(root string, keep providers.FileSupport) (string, error) {
	h := sha256.New()
	links := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m := fi.Mode()
		switch {
		case m.IsDir(), m.IsRegular(), m&fs.ModeSymlink != 0:
		case m&fs.ModeNamedPipe != 0 && keep.Fifos:
		default:
			return nil
		}
		fmt.Fprintf(h, "%q %s", rel, m.Type())
		if m&fs.ModeSymlink == 0 {
			fmt.Fprintf(h, " %o", uint32(m&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)))
		}
		fmt.Fprintln(h)
		if keep.HardLinks && m.IsRegular() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				k := [2]uint64{uint64(st.Dev), uint64(st.Ino)}
				if first, ok := links[k]; ok {
					fmt.Fprintf(h, "= %q\n", first)
					return nil // its content and attributes are first's
				}
				links[k] = rel
			}
		}
		if keep.Xattrs && (m.IsRegular() || m.IsDir()) {
			xs, err := fsmeta.LXattrs(p, fsmeta.User)
			if err != nil {
				return err
			}
			for _, x := range xs {
				fmt.Fprintf(h, "x %q %x\n", x.Name, x.Value)
			}
		}
		switch {
		case m.IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "\n%d\n", n)
		case m&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "-> %q\n", t)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", root, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fileSupport is what p's WriteFiles keeps (providers.FileSupporter), or
// the zero value when p does not say or cannot answer now: the digest then
// compares only what every provider keeps. Adapters answer from a probe
// kept for their life, so the restored tree's digest and the
// replacement's are taken with the same answer.
func fileSupport(ctx context.Context, p providers.Provider) providers.FileSupport {
	fsr, ok := p.(providers.FileSupporter)
	if !ok {
		return providers.FileSupport{}
	}
	keep, err := fsr.FileSupport(ctx)
	if err != nil {
		return providers.FileSupport{}
	}
	return keep
}
