package capture

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFileReplacedByDevice: a regular file whose name holds a
// character device that never ends (/dev/zero's numbers, 1:5) by the time
// a reader opens it. The walk's lstat stands for the fstat before the
// read, so nothing looked at the descriptor's type before reading: the
// reader must still notice, at the latest once it reads past the size the
// lstat gave, and record the file as replaced rather than read without
// end. (A reader that did not notice would run until the guard's deadline.)
func TestFileReplacedByDevice(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{"dev": "was a small file", "keep": "kept"})
	// Can this process make a device node here, and open it?
	probe := filepath.Join(t.TempDir(), "probe")
	if err := unix.Mknod(probe, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
		t.Skipf("cannot make a device node (needs CAP_MKNOD): %v", err)
	}
	if f, err := os.Open(probe); err != nil {
		t.Skipf("cannot open a device node here (nodev?): %v", err)
	} else {
		_ = f.Close()
	}
	r := capTestOpenRepo(t)
	o := capTestOptions(nil)
	o.hooks.beforeOpen = func(p string) {
		if p != "dev" {
			return
		}
		full := filepath.Join(root, p)
		if err := os.Remove(full); err != nil {
			t.Error(err)
			return
		}
		if err := unix.Mknod(full, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
			t.Error(err)
		}
	}
	// A guard, not a wait: a reader that notices ends the capture at once.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := Run(ctx, r, root, o)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("the capture read the device without end")
		}
		t.Fatalf("Capture: %v", err)
	}
	errs := capTestErrors(m)
	if m.Complete || errs["dev"] != errNotRegular.Error() || len(errs) != 1 {
		t.Fatalf("complete %v, errors %q", m.Complete, errs)
	}
	got := capTestFlatten(t, r, m.Root.Subtree)
	if _, ok := got["dev"]; ok {
		t.Errorf("the replaced file is in the snapshot: %+v", got["dev"])
	}
	if string(capTestContent(t, r, got["keep"])) != "kept" {
		t.Errorf("keep: %q", capTestContent(t, r, got["keep"]))
	}
}
