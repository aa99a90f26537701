package nstest

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs with the mount options opts (such as
// "size=256k,mode=0700") at a new temp dir, and unmounts it when the test
// ends; a small one is a real disk that fills up. It skips t when this
// process may not mount one (mounting needs root).
func Tmpfs(t testing.TB, opts string) string {
	t.Helper()
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, opts); err != nil {
		t.Skipf("skipping: mount -t tmpfs -o %s refused (mounting needs root): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}
