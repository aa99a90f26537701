//go:build !(linux && (amd64 || arm64))

package capture

import "golang.org/x/sys/unix"

// capFstatat is unix.Fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW); buf
// is unused here (fstatat_raw.go).
func capFstatat(dirfd int, name string, st *unix.Stat_t, buf []byte) ([]byte, error) {
	return buf, unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}
