package restore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rsFlushEach makes the restore start a writeback every n bytes written
// and count the syncfs calls, failing them with fail (nil: succeed). It
// sets package variables that every restore reads: a test that calls it
// must not run in parallel.
func rsFlushEach(t *testing.T, n int64, fail error) *atomic.Int32 {
	t.Helper()
	every, sync := rsFlushEvery, rsSyncfs
	t.Cleanup(func() { rsFlushEvery, rsSyncfs = every, sync })
	var calls atomic.Int32
	rsFlushEvery = n
	rsSyncfs = func(fd int) error {
		calls.Add(1)
		if fail != nil {
			return fail
		}
		return sync(fd)
	}
	return &calls
}

// Writeback started while files are written leaves a correct tree.
func TestRestoreEarlyWriteback(t *testing.T) {
	r, m, want := rsMixedRepo(t, 30, 100<<10)
	calls := rsFlushEach(t, 256<<10, nil)
	target := t.TempDir() + "/target"
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	if calls.Load() == 0 {
		t.Fatal("no writeback was started while the files were written")
	}
	rsCheckFiles(t, target, want)
}

// A writeback error met early fails the restore, though the final syncfs
// would no longer report it, and the target stays as it was.
func TestRestoreEarlyWritebackError(t *testing.T) {
	r, m, _ := rsMixedRepo(t, 30, 100<<10)
	calls := rsFlushEach(t, 256<<10, syscall.EIO)
	parent := t.TempDir()
	target, checkTarget := rsOldTarget(t, parent)
	_, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true, Workers: 2})
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("restore with a failed writeback: %v, want EIO", err)
	}
	if calls.Load() == 0 {
		t.Fatal("no writeback was started")
	}
	checkTarget()
	rsNoLeftovers(t, parent)
}

// rsResident counts the pages of the file at p that are in the page
// cache (mincore), and returns its page count beside.
func rsResident(t *testing.T, p string) (resident, pages int) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(m))), uintptr(len(m)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// A file of rsWriteBackMin bytes or more is on the disk and out of the
// page cache once restored, so the files after it reuse its pages; a
// smaller one stays cached.
func TestRestoreWritesBackLargeFiles(t *testing.T) {
	t.Parallel()
	r, m, want := rsMixedRepo(t, 6, rsWriteBackMin-50) // per directory: one file of rsWriteBackMin-50 bytes, one of 50 more
	parent := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(parent, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs keeps its pages: it has no disk to write them back to")
	}
	target := filepath.Join(parent, "target")
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	large := 0
	for name, data := range want {
		resident, pages := rsResident(t, filepath.Join(target, name))
		switch {
		case len(data) >= rsWriteBackMin:
			large++
			if resident > pages/4 {
				t.Errorf("%s (%d bytes): %d of its %d pages still in the page cache after the restore", name, len(data), resident, pages)
			}
		case resident < pages/2:
			t.Errorf("%s (%d bytes, below rsWriteBackMin): %d of its %d pages in the page cache, want them kept", name, len(data), resident, pages)
		}
	}
	if large != 3 {
		t.Fatalf("%d files of rsWriteBackMin bytes or more, want 3", large)
	}
	rsCheckFiles(t, target, want)
}

// A large file's failed writeback fails the restore with its path, and
// the target stays as it was.
func TestRestoreWriteBackError(t *testing.T) {
	r, m, _ := rsMixedRepo(t, 3, rsWriteBackMin)
	saved := rsSyncFileRange
	t.Cleanup(func() { rsSyncFileRange = saved })
	var calls atomic.Int32
	rsSyncFileRange = func(fd int, off, n int64, flags int) error {
		calls.Add(1)
		return syscall.EIO
	}
	parent := t.TempDir()
	target, checkTarget := rsOldTarget(t, parent)
	_, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true, Workers: 2})
	var rerr *Error
	if !errors.Is(err, syscall.EIO) || !errors.As(err, &rerr) || len(rerr.Paths) != 1 || !strings.HasSuffix(rerr.Paths[0], "/faa") {
		t.Fatalf("restore with a failed writeback: %v, want EIO naming the file", err)
	}
	if !strings.Contains(err.Error(), "writing back") {
		t.Errorf("error %q does not say what failed", err)
	}
	if calls.Load() == 0 {
		t.Fatal("no file was written back")
	}
	checkTarget()
	rsNoLeftovers(t, parent)
}

// A file system without sync_file_range (EINVAL, ENOSYS, ...) restores as
// before: the final syncfs writes the files.
func TestRestoreWriteBackUnsupported(t *testing.T) {
	r, m, want := rsMixedRepo(t, 3, rsWriteBackMin)
	saved := rsSyncFileRange
	t.Cleanup(func() { rsSyncFileRange = saved })
	for _, errno := range []syscall.Errno{syscall.EINVAL, syscall.ESPIPE, syscall.ENOSYS, syscall.EOPNOTSUPP} {
		var calls atomic.Int32
		rsSyncFileRange = func(fd int, off, n int64, flags int) error {
			calls.Add(1)
			return errno
		}
		target := filepath.Join(t.TempDir(), "target")
		if _, err := Run(t.Context(), r.Repository, m, Options{Target: target, Workers: 2}); err != nil {
			t.Fatalf("restore where sync_file_range fails with %v: %v", errno, err)
		}
		if calls.Load() != 3 {
			t.Errorf("%v: %d files written back, want 3", errno, calls.Load())
		}
		rsCheckFiles(t, target, want)
	}
}
