package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"lifeboat/providers/fsmeta"
)

var (
	errEOF                 = io.EOF
	errNotEmpty            = syscall.ENOTEMPTY
	errExchangeUnsupported = errors.New("atomic exchange not supported by this filesystem")
)

// trees says what the two sides of a copy are, for messages: "the source
// tree /srv/restore", "the staging directory of instance ws-1".
type trees struct{ src, dst string }

// copyBetween copies the tree at srcRel to the existing empty directory
// dstRel, both under r.
func copyBetween(ctx context.Context, r *os.Root, srcRel, dstRel string, names trees, clone bool) error {
	src, err := r.OpenRoot(srcRel)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := r.OpenRoot(dstRel)
	if err != nil {
		return err
	}
	defer dst.Close()
	return copyTree(ctx, src, dst, names, clone)
}

// scanRel is scanTree for a tree under r.
func scanRel(ctx context.Context, r *os.Root, rel string, names trees) error {
	src, err := r.OpenRoot(rel)
	if err != nil {
		return err
	}
	defer src.Close()
	return scanTree(ctx, src, names)
}

// scanTree refuses a tree holding a socket or a device before anything is
// written: nothing can create them, and finding one half-way would leave
// work to undo. It reads directory entries only.
func scanTree(ctx context.Context, src *os.Root, names trees) error {
	return fsmeta.ScanSource(ctx, src.FS(), Name, names.src, fsmeta.Uncreatable)
}

type dirMeta struct {
	rel  string
	info fs.FileInfo
}

type inode struct{ dev, ino uint64 }

// copyTree copies every entry of src into the empty directory dst and
// keeps what providers.FileSupport lists for this adapter:
//
//   - regular files, cloned with FICLONE when clone is set and the
//     filesystem allows (holes and all), else copied extent by extent
//     (SEEK_DATA/SEEK_HOLE) so holes stay holes;
//   - hard links: entries sharing an inode in src share one in dst;
//   - symlinks as symlinks (never followed), fifos (mkfifoat);
//   - permission bits with setuid, setgid and sticky, access and
//     modification times, every extended attribute the process can read
//     and write (see setXattrs), and ownership when running as root.
//
// Sockets and devices are refused by name (scanTree finds them first).
// Both sides are os.Roots, and fifos and symlink times are made through a
// directory opened in dst, so neither a symlink in src nor one created in
// dst can take a read or write outside them. Metadata goes in the order
// that keeps each step from undoing the last: owner (chown clears setuid
// and file capabilities), extended attributes, mode, times; directories
// last, deepest first. It ends with one syncfs so the tree is durable
// before anyone switches it in.
func copyTree(ctx context.Context, src, dst *os.Root, names trees, clone bool) error {
	c := &copier{src: src, dst: dst, names: names, clone: clone, links: map[inode]string{}}
	var dirs []dirMeta
	err := fsmeta.WalkSource(ctx, src.FS(), names.src, func(rel string, info fs.FileInfo) error {
		if info.IsDir() {
			if rel != "." {
				if err := dst.Mkdir(rel, 0o700); err != nil {
					return dstErr(names, "create", rel, err)
				}
			}
			dirs = append(dirs, dirMeta{rel, info})
			return nil
		}
		if done, err := c.link(rel, info); done || err != nil {
			return err
		}
		switch m := info.Mode(); {
		case m.IsRegular():
			return c.file(rel)
		case m&fs.ModeSymlink != 0:
			return c.symlink(rel, info)
		case m&fs.ModeNamedPipe != 0:
			return c.fifo(rel, info)
		default:
			return &unsupportedEntry{Provider: Name, Rel: rel, Type: m.Type(), Where: names.src, Written: true}
		}
	})
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		if err := c.dirMeta(d.rel, d.info); err != nil {
			return err
		}
	}
	f, err := dst.Open(".")
	if err != nil {
		return dstErr(names, "open", ".", err)
	}
	defer f.Close()
	if err := syncFS(f); err != nil {
		return dstErr(names, "sync", ".", err)
	}
	return nil
}

type copier struct {
	src, dst *os.Root
	names    trees
	clone    bool
	links    map[inode]string // first path of each multiply linked inode
	buf      []byte
}

// link makes rel a hard link of an earlier entry sharing its inode in src;
// done is false for a first (or only) link, which the caller copies.
func (c *copier) link(rel string, info fs.FileInfo) (done bool, err error) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 || info.Mode()&fs.ModeSymlink != 0 {
		return false, nil
	}
	k := inode{uint64(st.Dev), uint64(st.Ino)}
	first, ok := c.links[k]
	if !ok {
		c.links[k] = rel
		return false, nil
	}
	if err := c.dst.Link(first, rel); err != nil {
		return true, dstErr(c.names, "link "+first+" to", rel, err)
	}
	return true, nil
}

func (c *copier) file(rel string) error {
	in, err := c.src.Open(rel)
	if err != nil {
		return srcErr(c.names, "read", rel, err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("changed type while being copied")
	}
	var xs []fsmeta.Xattr
	if err == nil {
		xs, err = fdXattrs(in)
	}
	if err != nil {
		return srcErr(c.names, "read", rel, err)
	}
	out, err := c.dst.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return dstErr(c.names, "create", rel, err)
	}
	if !c.clone || reflink(out, in) != nil {
		if c.buf == nil {
			c.buf = make([]byte, 1<<20)
		}
		if err := copyData(out, in, info.Size(), c.buf); err != nil {
			out.Close()
			var re *readError
			if errors.As(err, &re) {
				return srcErr(c.names, "read", rel, re.err)
			}
			return dstErr(c.names, "write", rel, err)
		}
	}
	err = c.meta(rel, out, info, xs)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = dstErr(c.names, "write", rel, cerr)
	}
	if err != nil {
		return err
	}
	if err := c.dst.Chtimes(rel, atime(info), info.ModTime()); err != nil {
		return dstErr(c.names, "set the times of", rel, err)
	}
	return nil
}

// meta sets owner, extended attributes and mode on the open file f.
func (c *copier) meta(rel string, f *os.File, info fs.FileInfo, xs []fsmeta.Xattr) error {
	if uid, gid, ok := owner(info); ok {
		if err := f.Chown(uid, gid); err != nil {
			return dstErr(c.names, "set the owner of", rel, err)
		}
	}
	if err := setXattrs(f, xs); err != nil {
		return dstErr(c.names, "set extended attributes of", rel, err)
	}
	if err := f.Chmod(permBits(info.Mode())); err != nil {
		return dstErr(c.names, "set the mode of", rel, err)
	}
	return nil
}

func (c *copier) symlink(rel string, info fs.FileInfo) error {
	target, err := c.src.Readlink(rel)
	if err != nil {
		return srcErr(c.names, "read", rel, err)
	}
	if err := c.dst.Symlink(target, rel); err != nil {
		return dstErr(c.names, "create", rel, err)
	}
	if uid, gid, ok := owner(info); ok {
		if err := c.dst.Lchown(rel, uid, gid); err != nil {
			return dstErr(c.names, "set the owner of", rel, err)
		}
	}
	if err := inParent(c.dst, rel, func(dirfd int, name string) error {
		return lutimes(dirfd, name, atime(info), info.ModTime())
	}); err != nil {
		return dstErr(c.names, "set the times of", rel, err)
	}
	return nil
}

// fifo makes a named pipe. Linux allows user.* attributes only on regular
// files and directories, so a fifo has none to copy.
func (c *copier) fifo(rel string, info fs.FileInfo) error {
	if err := inParent(c.dst, rel, func(dirfd int, name string) error { return mkfifoat(dirfd, name, 0o600) }); err != nil {
		return dstErr(c.names, "create", rel, err)
	}
	if uid, gid, ok := owner(info); ok {
		if err := c.dst.Lchown(rel, uid, gid); err != nil {
			return dstErr(c.names, "set the owner of", rel, err)
		}
	}
	if err := c.dst.Chmod(rel, permBits(info.Mode())); err != nil {
		return dstErr(c.names, "set the mode of", rel, err)
	}
	if err := c.dst.Chtimes(rel, atime(info), info.ModTime()); err != nil {
		return dstErr(c.names, "set the times of", rel, err)
	}
	return nil
}

// dirMeta gives a directory its metadata once all its entries are made.
func (c *copier) dirMeta(rel string, info fs.FileInfo) error {
	in, err := c.src.Open(rel)
	if err != nil {
		return srcErr(c.names, "read", rel, err)
	}
	xs, err := fdXattrs(in)
	in.Close()
	if err != nil {
		return srcErr(c.names, "read", rel, err)
	}
	out, err := c.dst.Open(rel)
	if err != nil {
		return dstErr(c.names, "open", rel, err)
	}
	err = c.meta(rel, out, info, xs)
	out.Close()
	if err != nil {
		return err
	}
	if err := c.dst.Chtimes(rel, atime(info), info.ModTime()); err != nil {
		return dstErr(c.names, "set the times of", rel, err)
	}
	return nil
}

// inParent calls fn with a descriptor of rel's parent directory, opened
// through r (so no component can lead outside it), and rel's last name.
func inParent(r *os.Root, rel string, fn func(dirfd int, name string) error) error {
	d, err := r.Open(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(int(d.Fd()), filepath.Base(rel))
}

func permBits(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// owner returns the ids to give a copy when running as root; other users
// cannot give files away, and their copies belong to them.
func owner(info fs.FileInfo) (uid, gid int, ok bool) {
	st, isStat := info.Sys().(*syscall.Stat_t)
	if !isStat || os.Geteuid() != 0 {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// syncDir fsyncs the directory rel under r, making renames in it durable.
func syncDir(r *os.Root, rel string) error {
	f, err := r.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
