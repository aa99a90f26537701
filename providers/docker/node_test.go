package docker

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMirrorHoldsDevices: a device node in a container's workspace is in
// the mirror as a node of its type with device number 0 (capture records
// it, never stores it), the first time and again; without root the read
// is unsupported, naming it (tartree's tests).
func TestMirrorHoldsDevices(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the mirror holds device nodes only as root")
	}
	p, id := newContainer(t, "devices")
	ctx := context.Background()
	// An old mtime: a node made within 2 s of a read is racy, made again by the next.
	shell(t, p, id, "mknod nulldev c 1 3 && chmod 640 nulldev && touch -d '2024-01-02 03:04:05' nulldev")
	var inodes []uint64
	for _, read := range []string{"first read (extraction)", "second read (sync)"} {
		f, err := p.ReadFiles(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", read, err)
		}
		var st unix.Stat_t
		err = unix.Lstat(filepath.Join(f.Dir(), "nulldev"), &st)
		fi, _ := os.Lstat(filepath.Join(f.Dir(), "nulldev"))
		f.Close()
		if err != nil {
			t.Fatalf("%s: nulldev is not in the mirror: %v", read, err)
		}
		if fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice || fi.Mode().Perm() != 0o640 || st.Rdev != 0 {
			t.Fatalf("%s: nulldev in the mirror is %v rdev %d, want a character device 0640 rdev 0", read, fi.Mode(), st.Rdev)
		}
		inodes = append(inodes, st.Ino)
	}
	if inodes[0] != inodes[1] {
		t.Fatal("the unchanged device node was made again by the second read")
	}
}
