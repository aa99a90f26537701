package restore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
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

// rsWriteBackSizes replaces rsSyncFileRange with one that records the
// size of every file written back, then calls the real one, or returns
// fail when it is not nil. A test that calls it must not run in parallel.
func rsWriteBackSizes(t *testing.T, fail error) func() []int64 {
	t.Helper()
	saved := rsSyncFileRange
	t.Cleanup(func() { rsSyncFileRange = saved })
	var mu sync.Mutex
	var sizes []int64
	rsSyncFileRange = func(fd int, off, n int64, flags int) error {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		mu.Lock()
		sizes = append(sizes, st.Size)
		mu.Unlock()
		if fail != nil {
			return fail
		}
		return saved(fd, off, n, flags)
	}
	return func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(sizes))
	}
}

// rsDropsWrittenBack reports whether the file system of dir drops a file's
// pages once written back (ext4, xfs: yes; tmpfs, overlayfs: no).
func rsDropsWrittenBack(t *testing.T, dir string) bool {
	t.Helper()
	p := filepath.Join(dir, "probe")
	if err := os.WriteFile(p, make([]byte, rsWriteBackMin), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := (&rsWriteBacks{}).file(int(f.Fd()), rsWriteBackMin); err != nil {
		t.Fatal(err)
	}
	resident, pages := rsResident(t, p)
	return resident <= pages/4
}

// A file of rsWriteBackMin bytes or more is written back as soon as it is
// complete, and where the file system allows, is out of the page cache
// when the restore ends, so the files after it reused its pages; a
// smaller one is left to the syncfs.
func TestRestoreWritesBackLargeFiles(t *testing.T) {
	r, m, want := rsMixedRepo(t, 6, rsWriteBackMin-50) // per directory: a file of rsWriteBackMin-50 bytes and one of rsWriteBackMin+50
	sizes := rsWriteBackSizes(t, nil)
	parent := t.TempDir()
	drops := rsDropsWrittenBack(t, parent)
	target := filepath.Join(parent, "target")
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	if got, probe := sizes(), int64(rsWriteBackMin); !slices.Equal(got, []int64{probe, rsWriteBackMin + 50, rsWriteBackMin + 50, rsWriteBackMin + 50}) {
		t.Fatalf("written back: files of %v bytes, want the probe's %d and three of %d", got, probe, rsWriteBackMin+50)
	}
	if !drops {
		t.Logf("the file system of %s keeps written-back pages: their reuse is not checked", parent)
	}
	for name, data := range want {
		if resident, pages := rsResident(t, filepath.Join(target, name)); drops && len(data) >= rsWriteBackMin && resident > pages/4 {
			t.Errorf("%s (%d bytes): %d of its %d pages still in the page cache after the restore", name, len(data), resident, pages)
		}
	}
	rsCheckFiles(t, target, want)
}

// A large file's failed writeback fails the restore with its path, and
// the target stays as it was.
func TestRestoreWriteBackError(t *testing.T) {
	r, m, _ := rsMixedRepo(t, 3, rsWriteBackMin)
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		sizes := rsWriteBackSizes(t, errno)
		parent := t.TempDir()
		target, checkTarget := rsOldTarget(t, parent)
		_, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true, Workers: 2})
		var rerr *Error
		if !errors.Is(err, errno) || !errors.As(err, &rerr) || len(rerr.Paths) != 1 || !strings.HasSuffix(rerr.Paths[0], "/faa") {
			t.Fatalf("restore with a writeback failing with %v: %v, want that error naming the file", errno, err)
		}
		if !strings.Contains(err.Error(), "writing back") {
			t.Errorf("error %q does not say what failed", err)
		}
		if len(sizes()) == 0 {
			t.Fatal("no file was written back")
		}
		checkTarget()
		rsNoLeftovers(t, parent)
	}
}

// Where sync_file_range is refused for another reason (a file system
// without it, a seccomp filter: EINVAL, EPERM, ENOSYS, ...) the restore
// goes on as before, its files written by the final syncfs, and the
// writeback is not tried again.
func TestRestoreWriteBackRefused(t *testing.T) {
	r, m, want := rsMixedRepo(t, 3, rsWriteBackMin)
	for _, errno := range []syscall.Errno{syscall.EINVAL, syscall.EPERM, syscall.ENOSYS, syscall.EOPNOTSUPP} {
		sizes := rsWriteBackSizes(t, errno)
		target := filepath.Join(t.TempDir(), "target")
		if _, err := Run(t.Context(), r.Repository, m, Options{Target: target, Workers: 2}); err != nil {
			t.Fatalf("restore where sync_file_range fails with %v: %v", errno, err)
		}
		if len(sizes()) == 0 {
			t.Errorf("%v: no file was written back", errno)
		}
		rsCheckFiles(t, target, want)

		b := &rsWriteBacks{}
		before := len(sizes())
		fd, err := unix.Open(filepath.Join(target, "a", "faa"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := b.file(fd, rsWriteBackMin); err != nil {
				t.Errorf("%v: writeback: %v, want none", errno, err)
			}
		}
		unix.Close(fd)
		if n := len(sizes()) - before; n != 1 {
			t.Errorf("%v: sync_file_range called %d times for two writebacks, want once", errno, n)
		}
	}
}

// A graft's files (a browser profile's databases, read back by the
// validation right after) are not written back one by one.
func TestRestoreGraftNotWrittenBack(t *testing.T) {
	ctx := t.Context()
	r := snaptest.NewRepo(t)
	data := make([]byte, rsWriteBackMin+10)
	rsRandom(data, 7)
	prof := rsProfileDir(t, r, "History", data)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, rsWriteBackMin)
	rsRandom(big, 8)
	m := r.Manifest(t, r.Dir(t, "", r.File(t, "big", big), r.Dir(t, "home")), true)
	grafts := []snapshot.Graft{{Path: "home/prof", Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o700, MtimeNs: snaptest.Mtime, Subtree: prof},
		Tier: blob.Sensitive, Totals: snapshot.Totals{Files: 1, Dirs: 1}}}
	sizes := rsWriteBackSizes(t, nil)
	dst := filepath.Join(t.TempDir(), "out")
	if _, err := Run(ctx, r.Repository, m, Options{Target: dst, Grafts: grafts}); err != nil {
		t.Fatal(err)
	}
	if got := sizes(); !slices.Equal(got, []int64{rsWriteBackMin}) {
		t.Fatalf("written back: files of %v bytes, want only the workspace's file of %d", got, rsWriteBackMin)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "home", "prof", "History")); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("restored profile file: %d bytes, %v", len(b), err)
	}
}
