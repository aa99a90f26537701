package providertest

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// DenyWrites makes the directory dir refuse new entries: mode 0555 for a
// non-root user, the immutable attribute (chattr +i) for root, whom
// permission bits do not stop. It reports false when neither works here
// (root without CAP_LINUX_IMMUTABLE, a filesystem without the attribute).
// The change is undone when the test ends.
func DenyWrites(t testing.TB, dir string) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return true
	}
	const immutable = 0x10 // FS_IMMUTABLE_FL, linux/fs.h
	set := func(on bool) error {
		f, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer f.Close()
		flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		if err != nil {
			return err
		}
		if on {
			flags |= immutable
		} else {
			flags &^= immutable
		}
		return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
	}
	if err := set(true); err != nil {
		t.Logf("cannot make %s immutable as root: %v", dir, err)
		return false
	}
	t.Cleanup(func() {
		if err := set(false); err != nil {
			t.Errorf("clearing the immutable attribute of %s: %v", dir, err)
		}
	})
	return true
}

// MakeSocket creates a socket file at path (mknod S_IFSOCK: no listener,
// no length limit on the path).
func MakeSocket(t testing.TB, path string) {
	t.Helper()
	if err := unix.Mknod(path, unix.S_IFSOCK|0o600, 0); err != nil {
		t.Fatal(err)
	}
}

// MakeFifo creates a named pipe at path.
func MakeFifo(t testing.TB, path string, mode uint32) {
	t.Helper()
	if err := unix.Mkfifo(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, os.FileMode(mode)); err != nil {
		t.Fatal(err)
	}
}

// UserXattrs reports whether the filesystem holding dir takes user.*
// extended attributes.
func UserXattrs(t testing.TB, dir string) bool {
	t.Helper()
	f, err := os.CreateTemp(dir, "xattr-probe")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	err = unix.Fsetxattr(int(f.Fd()), "user.lifeboat.probe", []byte("1"), 0)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func setXattr(path, name string, value []byte) error { return unix.Lsetxattr(path, name, value, 0) }

// firstHole is the offset of the first hole in the file at path (its size
// when it has none).
func firstHole(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE)
}

func lutimes(path string, atime, mtime unix.Timespec) error {
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{atime, mtime}, unix.AT_SYMLINK_NOFOLLOW)
}
