package tartree

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"lifeboat/internal/osutil"
	"lifeboat/providers/fsmeta"
)

// ExtractOptions says where Extract writes, for messages.
type ExtractOptions struct {
	Where string // the tree being written ("the local mirror of sb1")
	// Owners applies each entry's uid and gid (Lchown; needs root).
	Owners bool
	// Provider names the adapter in a *fsmeta.CannotCreate.
	Provider string
}

// Extract writes the tar stream r into dst, an empty directory: regular
// files, directories, symlinks, hard links (to an earlier entry) and
// fifos, each with its permission bits and mtime (a symlink's own, not
// its target's; directories' after all
// their children), and with o.Owners its owner. A device is made as a
// node with device number 0 (MakeNode; without root it is a
// *fsmeta.CannotCreate). Xattrs are not applied. Any other special entry,
// a sparse entry (its holes would be written out, unbounded by the
// stream) or an entry whose name or link target leaves dst is refused: the error
// is a *fsmeta.EntryError naming the entry. Extract stops at the first
// error; what it wrote so far stays for the caller to remove.
func Extract(ctx context.Context, r io.Reader, dst *os.Root, o ExtractOptions) error {
	tr := tar.NewReader(r)
	var dirs Dirs
	fail := func(rel string, err error) error {
		return &fsmeta.EntryError{Verb: "create", Rel: rel, Where: o.Where, Dest: true, Err: err}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the tar stream for %s: %w", o.Where, err)
		}
		rel, ok := LocalName(h.Name)
		if !ok {
			return fail(h.Name, errors.New("the name leaves the tree (absolute or ..); refused"))
		}
		mode := osutil.FileMode(uint32(h.Mode))
		switch h.Typeflag {
		case tar.TypeDir:
			if rel != "." {
				if err := dst.MkdirAll(rel, 0o700); err != nil {
					return fail(rel, err)
				}
			}
			dirs.Add(rel, h)
		case tar.TypeReg, tar.TypeRegA:
			if sparse(h) {
				return fail(rel, fmt.Errorf("a sparse entry (declaring %d bytes) is never extracted: nothing Lifeboat reads writes one; refused", h.Size))
			}
			if err := parent(dst, rel); err != nil {
				return fail(rel, err)
			}
			if err := writeFile(dst, rel, tr, mode, h.ModTime); err != nil {
				return fail(rel, err)
			}
		case tar.TypeSymlink:
			if err := parent(dst, rel); err != nil {
				return fail(rel, err)
			}
			if err := dst.Symlink(h.Linkname, rel); err != nil {
				return fail(rel, err)
			}
			if err := LutimesIn(dst, rel, h.ModTime); err != nil {
				return fail(rel, err)
			}
		case tar.TypeLink:
			target, ok := LocalName(h.Linkname)
			if !ok || target == "." {
				return fail(rel, fmt.Errorf("hard link to %q leaves the tree; refused", h.Linkname))
			}
			if err := parent(dst, rel); err != nil {
				return fail(rel, err)
			}
			if err := dst.Link(target, rel); err != nil {
				return fail(rel, err)
			}
		case tar.TypeFifo:
			if err := parent(dst, rel); err != nil {
				return fail(rel, err)
			}
			if err := MkfifoIn(dst, rel); err != nil {
				return fail(rel, err)
			}
			if err := dst.Chmod(rel, mode); err != nil {
				return fail(rel, err)
			}
			if err := dst.Chtimes(rel, h.ModTime, h.ModTime); err != nil {
				return fail(rel, err)
			}
		case tar.TypeChar, tar.TypeBlock:
			if err := parent(dst, rel); err != nil {
				return fail(rel, err)
			}
			if err := MakeNode(dst, rel, NodeType(h), mode, h.ModTime, o.Provider, o.Where); err != nil {
				var cc *fsmeta.CannotCreate
				if errors.As(err, &cc) {
					return err
				}
				return fail(rel, err)
			}
		case tar.TypeXHeader, tar.TypeXGlobalHeader, tar.TypeGNULongName, tar.TypeGNULongLink:
			continue // consumed by archive/tar
		default:
			return fail(rel, fmt.Errorf("entry type %q (a device or other special file) is never created; refused", string(h.Typeflag)))
		}
		if o.Owners && h.Typeflag != tar.TypeLink && h.Typeflag != tar.TypeDir {
			if err := dst.Lchown(rel, h.Uid, h.Gid); err != nil {
				return fail(rel, err)
			}
			// A chown clears setuid and setgid: the mode again.
			if h.Typeflag != tar.TypeSymlink {
				if err := dst.Chmod(rel, mode); err != nil {
					return fail(rel, err)
				}
			}
		}
	}
	if rel, err := dirs.Apply(dst, o.Owners); err != nil {
		return fail(rel, err)
	}
	return nil
}

func writeFile(dst *os.Root, rel string, r io.Reader, mode os.FileMode, mtime time.Time) error {
	f, err := dst.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dst.Chtimes(rel, mtime, mtime)
	}
	return err
}

// sparse reports a PAX sparse entry (GNU.sparse.* records): archive/tar
// expands its holes, so its size is not bounded by the stream's and a
// small hostile archive could fill the disk.
func sparse(h *tar.Header) bool {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// parent makes sure rel's directory exists (a stream need not list it).
func parent(dst *os.Root, rel string) error {
	if d := filepath.Dir(rel); d != "." {
		return dst.MkdirAll(d, 0o700)
	}
	return nil
}

// LocalName cleans a tar entry name to a path relative to the tree; false
// for one that is absolute or leaves it.
func LocalName(name string) (string, bool) {
	if name == "" || strings.HasPrefix(name, "/") {
		return "", false
	}
	c := path.Clean(name)
	if c == "." {
		return ".", true
	}
	if !filepath.IsLocal(c) {
		return "", false
	}
	return filepath.FromSlash(c), true
}

// Depth is how many names deep rel is (0 for ".").
func Depth(rel string) int {
	if rel == "." {
		return 0
	}
	return strings.Count(rel, string(filepath.Separator)) + 1
}
