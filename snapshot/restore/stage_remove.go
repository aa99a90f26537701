package restore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// KeptPath is an entry that removing a tree left in place, and why.
type KeptPath struct {
	Path string `json:"path"`
	Why  string `json:"why"` // what it is and what to do, for people
}

// Remains is what removing a tree (a replaced target, a staging
// directory) left in place: its root, still there, and the entries inside
// it that stayed. Directories above a kept entry stay too and are not
// listed.
type Remains struct {
	Path string
	Kept []KeptPath // at most maxKeptListed
	More int        // entries that stayed beyond those listed
}

// maxKeptListed bounds the entries a Remains names: a read-only or
// immutable subtree would otherwise list every file.
const maxKeptListed = 20

// String says what stayed, for people.
func (r *Remains) String() string {
	s := r.Path + " could not be removed entirely"
	for i, k := range r.Kept {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		s += sep + k.Path + " stayed: " + k.Why
	}
	if r.More > 0 {
		s += fmt.Sprintf("; and %d more entries", r.More)
	}
	return s
}

// errMountPoint: a directory is the root of a mount (a bind mount of a
// directory on the same filesystem included).
var errMountPoint = errors.New("a mount point")

// treeRemover removes a tree restore owns (its staging directory, or the
// tree a --replace swapped out) without ever leaving it. Every directory
// is opened by one name relative to its parent's descriptor, with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_XDEV|RESOLVE_NO_SYMLINKS) and
// O_NOFOLLOW: a symlink is unlinked, never followed, and a mount point (a
// bind mount on the same filesystem too) is never entered. Where openat2
// is missing (Linux < 5.6, or refused by a seccomp filter) each directory
// is opened with openat(O_NOFOLLOW) and checked with statx: the mount-root
// attribute (Linux 5.8+), else the mount id, else the device, against its
// parent. What cannot be removed stays, with everything above it, and is
// named with the reason.
type treeRemover struct {
	root    string // the tree's path, for messages
	openat2 func(dirfd int, path string, how *unix.OpenHow) (int, error)
	euid    int
	buf     []byte // getdents buffer: a directory's batch is parsed before recursing
	rem     Remains
	stop    error // an error that fails every removal (a read-only filesystem)
}

// removeTree removes name in parentFD (whose path is parent) and
// everything under it that can be removed. It returns nil when all of it
// is gone (or was already), else what stayed.
func removeTree(parentFD int, parent, name string, openat2 func(int, string, *unix.OpenHow) (int, error)) *Remains {
	if openat2 == nil {
		openat2 = unix.Openat2
	}
	root := filepath.Join(parent, name)
	rm := &treeRemover{root: root, openat2: openat2, euid: os.Geteuid(), buf: make([]byte, 8<<10), rem: Remains{Path: root}}
	if rm.remove(parentFD, name, root) {
		return nil
	}
	if len(rm.rem.Kept) == 0 && rm.rem.More == 0 {
		rm.rem.Kept = []KeptPath{{Path: root, Why: "it is not empty (entries kept appearing while it was removed): remove it by hand"}}
	}
	return &rm.rem
}

// remove removes name in dirfd (at path) and reports whether it is gone.
func (rm *treeRemover) remove(dirfd int, name, path string) bool {
	if rm.stop != nil {
		rm.keep(path, rm.stop)
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return true
		}
		rm.keep(path, err)
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return rm.unlink(dirfd, name, path, 0)
	}
	fd, err := rm.openDir(dirfd, name)
	switch {
	case err == unix.ENOENT:
		return true
	case err == unix.ENOTDIR || err == unix.ELOOP: // replaced by a file or a symlink meanwhile
		return rm.unlink(dirfd, name, path, 0)
	case err != nil:
		rm.keep(path, err)
		return false
	}
	defer unix.Close(fd)
	rm.makeAccessible(fd)
	for pass := 0; ; pass++ {
		if !rm.removeChildren(fd, path) {
			return false // what stayed below is named
		}
		err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		if err != unix.ENOTEMPTY && err != unix.EEXIST || pass == 2 {
			return rm.unlinked(path, err)
		}
		// Entries appeared (or a filesystem's readdir skipped some while
		// entries were removed): read it again from the start.
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			rm.keep(path, err)
			return false
		}
	}
}

// removeChildren removes every entry of the directory fd (at path) and
// reports whether all are gone.
func (rm *treeRemover) removeChildren(fd int, path string) bool {
	all := true
	for {
		n, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.Getdents(fd, rm.buf) })
		if err != nil {
			rm.keep(path, fmt.Errorf("reading the directory: %w", err))
			return false
		}
		if n <= 0 {
			return all
		}
		_, _, names := unix.ParseDirent(rm.buf[:n], -1, nil) // "." and ".." left out
		for _, c := range names {
			if !rm.remove(fd, c, filepath.Join(path, c)) {
				all = false
			}
		}
	}
}

// openDir opens the directory name in dirfd for reading, never through a
// symlink and never into another mount (errMountPoint).
func (rm *treeRemover) openDir(dirfd int, name string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	how := unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for try := 0; ; try++ {
		fd, err := rm.openat2(dirfd, name, &how)
		if err == unix.ENOSYS || err == unix.EPERM {
			fd, err = rm.openFallback(dirfd, name, flags)
		}
		switch {
		case err == unix.EXDEV:
			return -1, errMountPoint
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err == unix.EACCES && try == 0 && rm.allowSearch(dirfd, name):
			continue // once more, now that its owner may read it
		}
		return fd, err
	}
}

// openFallback is openDir without openat2.
func (rm *treeRemover) openFallback(dirfd int, name string, flags int) (int, error) {
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		return -1, err
	}
	if mnt, err := isMountRoot(fd, dirfd); err != nil || mnt {
		_ = unix.Close(fd)
		if err == nil {
			err = errMountPoint
		}
		return -1, err
	}
	return fd, nil
}

// mountPointAt reports whether the directory name in dirfd is a mount
// point (a bind mount of a directory of the same filesystem too). It
// opens it with O_PATH, so it needs no permission on the directory.
func mountPointAt(dirfd int, name string, openat2 func(int, string, *unix.OpenHow) (int, error)) bool {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	how := unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := openat2(dirfd, name, &how)
	if err == unix.ENOSYS || err == unix.EPERM {
		if fd, err = unix.Openat(dirfd, name, flags, 0); err == nil {
			mnt, merr := isMountRoot(fd, dirfd)
			_ = unix.Close(fd)
			return merr == nil && mnt
		}
	}
	if err == nil {
		_ = unix.Close(fd)
	}
	return err == unix.EXDEV
}

// isMountRoot reports whether the directory fd is the root of a mount
// other than the one of its parent pfd.
func isMountRoot(fd, pfd int) (bool, error) {
	var sx, psx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, &sx); err == nil {
		if sx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
			return sx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
		}
		if sx.Mask&unix.STATX_MNT_ID != 0 {
			if err := unix.Statx(pfd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &psx); err != nil {
				return false, err
			}
			return sx.Mnt_id != psx.Mnt_id, nil
		}
	}
	var st, pst unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	if err := unix.Fstat(pfd, &pst); err != nil {
		return false, err
	}
	return st.Dev != pst.Dev, nil
}

// makeAccessible gives the owner read, write and search permission on the
// open directory fd when it lacks them and this process owns it (not
// root: root needs none). The tree is being removed.
func (rm *treeRemover) makeAccessible(fd int) {
	if rm.euid == 0 {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && int(st.Uid) == rm.euid && st.Mode&0o700 != 0o700 {
		_ = unix.Fchmod(fd, st.Mode&0o7777|0o700)
	}
}

// allowSearch gives the owner access to the directory name in dirfd,
// which it could not open: through an O_PATH descriptor opened with the
// same resolution rules (chmod of /proc/self/fd/N acts on what the
// descriptor holds, never on a symlink). It reports whether it did.
func (rm *treeRemover) allowSearch(dirfd int, name string) bool {
	if rm.euid == 0 {
		return false
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := rm.openat2(dirfd, name, &how)
	if err == unix.ENOSYS || err == unix.EPERM {
		fd, err = unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			if mnt, merr := isMountRoot(fd, dirfd); merr != nil || mnt {
				_ = unix.Close(fd)
				return false
			}
		}
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || int(st.Uid) != rm.euid {
		return false
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o7777|0o700) == nil
}

// unlink removes a non-directory (flags 0) or an empty directory.
func (rm *treeRemover) unlink(dirfd int, name, path string, flags int) bool {
	return rm.unlinked(path, unix.Unlinkat(dirfd, name, flags))
}

func (rm *treeRemover) unlinked(path string, err error) bool {
	switch err {
	case nil, unix.ENOENT:
		return true
	case unix.EBUSY: // a mount point (a bind-mounted file, or one openat2 did not see)
		err = errMountPoint
	}
	rm.keep(path, err)
	return false
}

// keep records that path stays, and why.
func (rm *treeRemover) keep(path string, err error) {
	if err == unix.EROFS {
		rm.stop = err
	}
	if len(rm.rem.Kept) >= maxKeptListed {
		rm.rem.More++
		return
	}
	rm.rem.Kept = append(rm.rem.Kept, KeptPath{Path: path, Why: keptWhy(err, rm.root)})
}

// keptWhy says why an entry stayed and what to do about it.
func keptWhy(err error, root string) string {
	switch {
	case errors.Is(err, errMountPoint):
		return "a mount point (removal never enters one): unmount it, then remove " + root
	case errors.Is(err, unix.EPERM):
		return "the filesystem refused (operation not permitted: an immutable or append-only attribute? see lsattr): clear it with chattr -i -a, then remove " + root
	case errors.Is(err, unix.EACCES):
		return "permission denied: remove " + root + " as a user allowed to"
	case errors.Is(err, unix.EROFS):
		return "read-only filesystem: remount it read-write, then remove " + root
	}
	return err.Error() + ": remove " + root + " by hand"
}
