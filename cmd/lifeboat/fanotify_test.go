package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// watchReads opens a fanotify group that asks permission for every read
// of path, by any thread of any process (FAN_ACCESS_PERM), as a
// non-blocking file: Close ends a Read and lets every held read through.
// It needs CAP_SYS_ADMIN; without, the test is skipped, saying that
// holding what needs it.
func watchReads(t *testing.T, path, what string) *os.File {
	t.Helper()
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		t.Skipf("holding %s needs fanotify permission events (CAP_SYS_ADMIN): %v", what, err)
	}
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_ACCESS_PERM, unix.AT_FDCWD, path); err != nil {
		_ = unix.Close(fd)
		t.Skipf("fanotify mark on %s: %v", path, err)
	}
	return os.NewFile(uintptr(fd), "fanotify")
}

// readFanotify reads f's events until f is closed, handing each event's
// mask and file descriptor (negative: none; else fn's to close) to fn.
// It ends with an error at an event whose size is out of bounds.
func readFanotify(f *os.File, fn func(mask uint64, evfd int)) error {
	const metaSize = 24 // unix.FanotifyEventMetadata: len, vers, reserved, metadata_len, mask, fd, pid
	buf := make([]byte, 64*metaSize)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return nil // closed: the kernel lets every held read through
		}
		for b := buf[:n]; len(b) >= metaSize; {
			size := binary.NativeEndian.Uint32(b[0:])
			fn(binary.NativeEndian.Uint64(b[8:]), int(int32(binary.NativeEndian.Uint32(b[16:]))))
			if size < metaSize || int(size) > len(b) {
				return fmt.Errorf("fanotify event of %d bytes", size)
			}
			b = b[size:]
		}
	}
}
