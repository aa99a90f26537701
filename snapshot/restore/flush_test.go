package restore

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
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
