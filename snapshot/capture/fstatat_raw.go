//go:build linux && (amd64 || arm64)

package capture

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// capFstatat is unix.Fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) with
// the NUL-terminated copy of name in buf (grown as needed, and returned)
// rather than in a new allocation: the walk stats every entry of the tree.
func capFstatat(dirfd int, name string, st *unix.Stat_t, buf []byte) ([]byte, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return buf, unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW) // EINVAL
	}
	buf = append(append(buf[:0], name...), 0)
	_, _, errno := unix.Syscall6(capSysFstatat, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])),
		uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if errno != 0 {
		return buf, errno
	}
	return buf, nil
}
