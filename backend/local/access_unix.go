//go:build unix

package local

import (
	"io/fs"
	"strconv"
	"syscall"
)

// ownerOf says who owns fi, as "owned by uid N with ".
func ownerOf(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return "owned by uid " + strconv.FormatUint(uint64(st.Uid), 10) + " with "
	}
	return "of "
}
