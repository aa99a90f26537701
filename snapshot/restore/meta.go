package restore

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"lifeboat/snapshot"
)

// Metadata is applied in the order that keeps each step from undoing or
// blocking the next: ownership first (chown clears setuid and setgid),
// then user.* extended attributes, then times (atime = mtime), then the
// permission bits, setuid, setgid and sticky last. Directories get theirs
// after all their entries, so creating children does not move their mtime
// and a read-only directory is finished before it turns read-only.

// metaFD applies e's metadata to an open file, FIFO or directory. One
// fstat tells which of ownership and mode already are as asked: a root
// restore's files are mostly created with the right owner, and a file
// created with its final mode (createMode) mostly has it.
func (w *rsWriter) metaFD(fd int, e *rsEntry) error {
	return w.metaFile(fd, e, -1)
}

// metaFile is metaFD for a regular file whose content is written: its
// fstat also checks that the file's size is size (unless negative).
func (w *rsWriter) metaFile(fd int, e *rsEntry, size int64) error {
	n := e.node
	fail := func(what string, err error) error {
		return &Error{Paths: []string{e.path}, Err: fmt.Errorf("%s: %w", what, err)}
	}
	var st unix.Stat_t
	serr := unix.Fstat(fd, &st)
	stated := serr == nil
	if size >= 0 {
		if serr != nil {
			return fail("checking the size written", serr)
		}
		if st.Size != size {
			return fail("checking the size written", fmt.Errorf("%w: %d bytes on disk, %d in the snapshot", ErrContentMismatch, st.Size, size))
		}
	}
	chowned := false
	if w.chown && !(stated && st.Uid == n.UID && st.Gid == n.GID) {
		chowned = true
		if err := unix.Fchown(fd, int(n.UID), int(n.GID)); err != nil {
			return fail(fmt.Sprintf("setting owner %d:%d", n.UID, n.GID), err)
		}
	}
	for _, x := range n.Xattrs {
		if err := unix.Fsetxattr(fd, x.Name, x.Value, 0); err != nil {
			if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
				w.progress.Error(e.path, fmt.Errorf("extended attribute %q not restored: the target filesystem does not support it", x.Name))
				continue
			}
			if n.Type == snapshot.TypeFIFO && errors.Is(err, unix.EPERM) { // Linux allows user.* only on files and directories
				w.progress.Error(e.path, fmt.Errorf("extended attribute %q not restored: Linux does not allow it on a FIFO", x.Name))
				continue
			}
			return fail(fmt.Sprintf("setting extended attribute %q", x.Name), err)
		}
	}
	if err := rsFutimens(fd, n.MtimeNs); err != nil {
		return fail("setting times", err)
	}
	// The mode as created may differ from the one asked: a default ACL
	// on the directory, not the umask, masks a new file's mode where there
	// is one (as may other filesystems' own rules). A chown above cleared
	// setuid and setgid, which the fstat before it still shows.
	if stated && st.Mode&0o7777 == n.Mode && !(chowned && n.Mode&0o6000 != 0) {
		return nil
	}
	if err := unix.Fchmod(fd, n.Mode); err != nil {
		return fail(fmt.Sprintf("setting mode %04o", n.Mode), err)
	}
	return nil
}

// createMode is the mode to create regular file n with: its final mode
// when that has no setuid, setgid or sticky bit (chown would clear the
// first two), survives the umask, and lets the owner read and write, or
// need not: once says the file is written through the descriptor that
// creates it (one chunk or none, so it is never closed and opened again
// between chunks), and without extended attributes nothing else needs
// write permission (setting a user.* one does). Otherwise 0600. With its
// final mode, metaFD need not chmod it: most files of a read-only tree
// (a Go module cache) are created 0444 rather than chmodded.
func (w *rsWriter) createMode(n *snapshot.Node, once bool) uint32 {
	if w.umask < 0 || n.Mode&^0o777 != 0 || n.Mode&uint32(w.umask) != 0 {
		return 0o600
	}
	if n.Mode&0o600 != 0o600 && !(once && len(n.Xattrs) == 0) {
		return 0o600
	}
	return n.Mode
}

// rsUmask returns the process's umask, from /proc (Linux 4.7 and later),
// or -1 when it cannot be read.
func rsUmask() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return int(m)
			}
		}
	}
	return -1
}

// metaSymlink applies a symlink's ownership and times without following
// it; symlinks have no permission bits of their own on Linux.
func (w *rsWriter) metaSymlink(pfd int, e *rsEntry) error {
	n := e.node
	if w.chown {
		if err := unix.Fchownat(pfd, e.name, int(n.UID), int(n.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &Error{Paths: []string{e.path}, Err: fmt.Errorf("setting owner %d:%d: %w", n.UID, n.GID, err)}
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(n.MtimeNs), unix.NsecToTimespec(n.MtimeNs)}
	if err := unix.UtimesNanoAt(pfd, e.name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &Error{Paths: []string{e.path}, Err: fmt.Errorf("setting times: %w", err)}
	}
	return nil
}

// rsFutimens is futimens(3): utimensat on the descriptor itself (a NULL
// path), setting atime and mtime to ns.
func rsFutimens(fd int, ns int64) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(ns), unix.NsecToTimespec(ns)}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
