package ssh

import (
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/providers/fsmeta"
)

// applyXattrs turns f's user.* attributes from have into want.
func applyXattrs(f *os.File, have, want []fsmeta.Xattr) error {
	keep := make(map[string]bool, len(want))
	for _, x := range want {
		keep[x.Name] = true
		if err := unix.Fsetxattr(int(f.Fd()), x.Name, x.Value, 0); err != nil {
			return &os.PathError{Op: "setxattr " + x.Name, Path: f.Name(), Err: err}
		}
	}
	for _, x := range have {
		if !keep[x.Name] {
			if err := unix.Fremovexattr(int(f.Fd()), x.Name); err != nil && err != unix.ENODATA {
				return &os.PathError{Op: "removexattr " + x.Name, Path: f.Name(), Err: err}
			}
		}
	}
	return nil
}

// lutimesIn sets the atime and mtime of rel under r to t without
// following it (rel is a symlink), through its parent directory opened
// in r.
func lutimesIn(r *os.Root, rel string, t time.Time) error {
	d, err := r.Open(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer d.Close()
	ts := unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
	if err := unix.UtimesNanoAt(int(d.Fd()), filepath.Base(rel), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lutimes", Path: rel, Err: err}
	}
	return nil
}
