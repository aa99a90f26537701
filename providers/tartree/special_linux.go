package tartree

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// mknodat is unix.Mknodat; tests replace it to act without CAP_MKNOD.
var mknodat = unix.Mknodat

// LutimesIn sets the atime and mtime of rel under r to t without
// following it (rel may be a symlink), through its parent directory
// opened in r.
func LutimesIn(r *os.Root, rel string, t time.Time) error {
	d, err := r.Open(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer d.Close()
	ts := unix.NsecToTimespec(t.UnixNano())
	if err := unix.UtimesNanoAt(int(d.Fd()), filepath.Base(rel), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lutimes", Path: rel, Err: err}
	}
	return nil
}

// MknodIn makes a socket or a device node of typ (fs.ModeSocket,
// fs.ModeDevice, with fs.ModeCharDevice for a character device) at rel
// under r, mode 0600, through its parent directory opened in r. A device
// node gets device number 0: it records the entry's type for capture and
// opening it fails, so a mirror never gives access to a real device.
// Making a device node needs CAP_MKNOD (an fs.ErrPermission without it);
// a socket needs no privilege.
func MknodIn(r *os.Root, rel string, typ fs.FileMode) error {
	var kind uint32
	switch {
	case typ&fs.ModeSocket != 0:
		kind = unix.S_IFSOCK
	case typ&fs.ModeCharDevice != 0:
		kind = unix.S_IFCHR
	case typ&fs.ModeDevice != 0:
		kind = unix.S_IFBLK
	default:
		return &os.PathError{Op: "mknod", Path: rel, Err: unix.EINVAL}
	}
	d, err := r.Open(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := mknodat(int(d.Fd()), filepath.Base(rel), kind|0o600, 0); err != nil {
		return &os.PathError{Op: "mknod", Path: rel, Err: err}
	}
	return nil
}
