package local

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames oldRel to newRel (both relative to r) and fails
// with EEXIST when newRel exists, even as an empty directory (plain
// rename(2) would silently replace an empty one). Both parents are opened
// through r, so no path component can lead outside the root.
func renameNoReplace(r *os.Root, oldRel, newRel string) error {
	return renameat2(r, oldRel, newRel, unix.RENAME_NOREPLACE)
}

// exchange swaps oldRel and newRel atomically (RENAME_EXCHANGE, Linux 3.15
// and later on ext4, xfs, btrfs, tmpfs). errExchangeUnsupported means the
// filesystem cannot, and the caller falls back.
var exchange = func(r *os.Root, aRel, bRel string) error {
	err := renameat2(r, aRel, bRel, unix.RENAME_EXCHANGE)
	if err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP {
		return errExchangeUnsupported
	}
	return err
}

func renameat2(r *os.Root, oldRel, newRel string, flags uint) error {
	od, err := r.Open(filepath.Dir(oldRel))
	if err != nil {
		return err
	}
	defer od.Close()
	nd, err := r.Open(filepath.Dir(newRel))
	if err != nil {
		return err
	}
	defer nd.Close()
	err = unix.Renameat2(int(od.Fd()), filepath.Base(oldRel), int(nd.Fd()), filepath.Base(newRel), flags)
	if err != nil {
		return &os.LinkError{Op: "renameat2", Old: oldRel, New: newRel, Err: err}
	}
	return nil
}

// reflink clones src's content into dst (FICLONE); an error means the
// filesystem cannot and the caller copies instead.
func reflink(dst, src *os.File) error {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
}

// syncFS flushes the filesystem holding f: one syncfs(2) after a tree is
// written costs far less than an fsync per file and gives the same
// durability before the tree is switched in.
func syncFS(f *os.File) error { return unix.Syncfs(int(f.Fd())) }

func atime(info fs.FileInfo) time.Time {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return time.Unix(int64(st.Atim.Sec), int64(st.Atim.Nsec))
	}
	return info.ModTime()
}
