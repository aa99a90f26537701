package local

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/providers/fsmeta"
)

// readError marks a copyData failure on the source side.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// copyData copies the first size bytes of in to out, data extent by data
// extent (SEEK_DATA, SEEK_HOLE), then sets out's size: holes in in stay
// holes in out. Each extent goes through copy_file_range (in the kernel,
// shared where the filesystem can) or, where that is refused, through
// buf.
func copyData(out, in *os.File, size int64, buf []byte) error {
	ifd, ofd := int(in.Fd()), int(out.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(ifd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // nothing but a hole up to the end
		}
		hole := size
		if err != nil {
			if off != 0 || (err != unix.EINVAL && err != unix.EOPNOTSUPP) {
				return &readError{err}
			}
			data = 0 // no SEEK_DATA here: one extent
		} else if hole, err = unix.Seek(ifd, data, unix.SEEK_HOLE); err != nil {
			return &readError{err}
		}
		hole = min(hole, size)
		if data >= hole {
			break
		}
		if err := copyRange(ofd, ifd, data, hole-data, buf); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}

func copyRange(ofd, ifd int, off, n int64, buf []byte) error {
	roff, woff := off, off
	for n > 0 {
		c, err := unix.CopyFileRange(ifd, &roff, ofd, &woff, int(min(n, 1<<30)), 0)
		if err != nil {
			if err == unix.EXDEV || err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP || err == unix.EPERM {
				return copyRangeBuf(ofd, ifd, roff, n, buf)
			}
			return err
		}
		if c == 0 {
			return nil // the file shrank under us; Truncate sets the size
		}
		n -= int64(c)
	}
	return nil
}

func copyRangeBuf(ofd, ifd int, off, n int64, buf []byte) error {
	for n > 0 {
		r, err := unix.Pread(ifd, buf[:min(n, int64(len(buf)))], off)
		if err != nil {
			return &readError{err}
		}
		if r == 0 {
			return nil
		}
		for w := 0; w < r; {
			k, err := unix.Pwrite(ofd, buf[w:r], off+int64(w))
			if err != nil {
				return err
			}
			w += k
		}
		off += int64(r)
		n -= int64(r)
	}
	return nil
}

// fdXattrs lists every extended attribute of f the process can read.
func fdXattrs(f *os.File) ([]fsmeta.Xattr, error) { return fsmeta.FdXattrs(int(f.Fd()), fsmeta.All) }

// setXattrs sets xs on f. Two refusals are not errors: a filesystem that
// takes no extended attributes (FileSupport probes the root for user.*
// ones and says so), and a namespace other than user.* that this process
// may not write (trusted.* or security.* as a non-root user).
func setXattrs(f *os.File, xs []fsmeta.Xattr) error {
	for _, x := range xs {
		err := unix.Fsetxattr(int(f.Fd()), x.Name, x.Value, 0)
		switch {
		case err == nil, fsmeta.Unsupported(err):
		case !fsmeta.User(x.Name) && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)):
		default:
			return &os.PathError{Op: "setxattr " + x.Name, Path: f.Name(), Err: err}
		}
	}
	return nil
}

func mkfifoat(dirfd int, name string, mode uint32) error { return unix.Mkfifoat(dirfd, name, mode) }

// lutimes sets the times of name itself (a symlink's own).
func lutimes(dirfd int, name string, atime, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// probeXattr reports whether f's filesystem takes a user.* attribute.
func probeXattr(f *os.File) bool {
	return unix.Fsetxattr(int(f.Fd()), "user.lifeboat.probe", []byte("1"), 0) == nil
}

// probeHole reports whether f's filesystem keeps a hole: after writing one
// byte at 1 MiB, the file's start must read as a hole.
func probeHole(f *os.File) bool {
	if _, err := f.WriteAt([]byte{1}, 1<<20); err != nil {
		return false
	}
	off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE)
	return err == nil && off == 0
}
