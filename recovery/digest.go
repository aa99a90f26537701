package recovery

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// treeDigest is a SHA-256 over a directory tree: every entry's slash path,
// type, permission bits and content (a symlink's target). Times and owners
// are left out: copies keep them where they can, and the digest compares
// what a workspace is made of. WalkDir visits entries in lexical order, so
// equal trees give equal digests.
func treeDigest(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil // the replacement's own directory keeps its mode
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %s %o\n", filepath.ToSlash(rel), fi.Mode().Type(), fi.Mode().Perm())
		switch {
		case fi.Mode().IsRegular():
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
		case fi.Mode()&fs.ModeSymlink != 0:
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
