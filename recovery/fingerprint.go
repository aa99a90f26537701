package recovery

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
	"lifeboat/recovery/dirwatch"
)

// fingerprint is the cheap change detection behind periodic capture: a
// digest, keyed with the store's salt (so it reveals nothing about names),
// of every entry's path, type, mode, size, mtime, ctime and inode under
// dir, symlinks not followed. It costs one lstat per entry and reads no
// content. Equal fingerprints mean the capture would find every file
// unchanged, as the file cache judges it (same inode, size, mtime, ctime).
//
// The digest is that of a filepath.WalkDir of dir that hashes, for each
// entry in lexical order, its path relative to dir, a NUL, then its
// os.Lstat (Go file mode u32, size, mtime ns, ctime ns, inode, device:
// u64 LE each) or the text of the error that stopped it, and a NUL: the
// walk is done here by descriptor (each directory listed once, each entry
// stat'ed relative to its directory's descriptor) but the bytes hashed,
// error texts included, are the same, so a fingerprint stored by an
// earlier version still matches unchanged files.
//
// With tree set, the walk also watches what it walks (see dirwatch.Tree):
// each directory before it is listed, each other entry with more than one
// link. The caller marks the tree before and ends its walk after; a walk
// that could not list a directory, or that watched no root, fails it. The
// root's own stat is taken before any watch is in place: the caller
// compares it again (fingerprints.of).
func fingerprint(salt []byte, dir string, tree *dirwatch.Tree) ([]byte, error) {
	h, err := blake3.NewKeyed(salt)
	if err != nil {
		return nil, err
	}
	w := &fpWalk{h: h, tree: tree}
	var st unix.Stat_t
	if err := osutil.IgnoringEINTR(func() error { return unix.Lstat(dir, &st) }); err != nil {
		w.entry(".", nil, &fs.PathError{Op: "lstat", Path: dir, Err: err})
		return h.Sum(nil), nil
	}
	w.entry(".", &st, nil)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		w.dir(unix.AT_FDCWD, dir, dir, ".", &st)
	}
	return h.Sum(nil), nil
}

// fpWalk is one fingerprint's walk.
type fpWalk struct {
	h    *blake3.Hasher
	buf  []byte
	tree *dirwatch.Tree // nil: nothing is watched
}

// entry hashes the entry at rel: its stat st, or err.
func (w *fpWalk) entry(rel string, st *unix.Stat_t, err error) {
	buf := append(w.buf[:0], rel...)
	buf = append(buf, 0)
	if err != nil {
		buf = append(buf, err.Error()...)
	} else {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(fpMode(st.Mode)))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(st.Size))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(st.Mtim.Nano()))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(st.Ctim.Nano()))
		buf = binary.LittleEndian.AppendUint64(buf, st.Ino)
		buf = binary.LittleEndian.AppendUint64(buf, st.Dev)
	}
	buf = append(buf, 0)
	_, _ = w.h.Write(buf)
	w.buf = buf
}

// dir hashes the entries of the directory name of the directory open as
// parent (path is its path as WalkDir has it, rel its path relative to
// the root, st its stat), each subdirectory's right after its own entry.
func (w *fpWalk) dir(parent int, name, path, rel string, st *unix.Stat_t) {
	f, ents, err := fpReadDir(parent, name, path, func(fd int) {
		if w.tree != nil {
			_ = w.tree.WatchDir(fd, st) // a failure is the tree's: Done reports it
		}
	})
	if f != nil {
		defer f.Close()
	}
	if err != nil {
		// As WalkDir: the error is hashed under the directory's path, and
		// the entries listed before it (none below the root) follow.
		w.entry(rel, nil, err)
		if w.tree != nil {
			// What the walk could not list is not watched either.
			w.tree.Fail(fmt.Errorf("listing %s: %w", path, err))
		}
		if rel != "." {
			return
		}
	}
	fd := -1
	if f != nil {
		fd = int(f.Fd())
	}
	for _, e := range ents {
		n := e.Name()
		crel := n
		if rel != "." {
			crel = rel + "/" + n
		}
		var st unix.Stat_t
		if err := osutil.IgnoringEINTR(func() error { return unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
			// The text os.ReadDir's entry gives (Info: an lstat of the
			// directory's path, "/", the name).
			w.entry(crel, nil, &fs.PathError{Op: "lstat", Path: path + "/" + n, Err: err})
		} else {
			w.entry(crel, &st, nil)
			if w.tree != nil && st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
				// A change through another link, between the stat and
				// the watch, is seen by a second stat.
				var now unix.Stat_t
				if w.tree.WatchFile(path+"/"+n) == nil &&
					(unix.Fstatat(fd, n, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || !sameStat(&st, &now)) {
					w.tree.Invalidate()
				}
			}
		}
		if e.IsDir() {
			w.dir(fd, n, filepath.Join(path, n), crel, &st)
		}
	}
}

// fpReadDir opens directory name of the directory open as parent, calls
// opened with its descriptor, and lists it as os.ReadDir(path) would:
// sorted by name, each entry's type from the listing, the entries read
// before an error with the error.
func fpReadDir(parent int, name, path string, opened func(fd int)) (*os.File, []fs.DirEntry, error) {
	var fd int
	err := osutil.IgnoringEINTR(func() error {
		var err error
		fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	opened(fd)
	f := os.NewFile(uintptr(fd), path)
	ents, err := f.ReadDir(-1)
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return f, ents, err
}

// sameStat reports whether a and b, two stats of one path, show no change
// the fingerprint hashes.
func sameStat(a, b *unix.Stat_t) bool {
	return a.Ino == b.Ino && a.Dev == b.Dev && a.Mode == b.Mode && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// fpMode is the fs.FileMode os.Lstat gives for a stat mode.
func fpMode(m uint32) fs.FileMode {
	mode := osutil.FileMode(m)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	return mode
}
