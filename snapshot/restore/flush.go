package restore

import (
	"errors"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// rsFlusher starts the staging tree's writeback while files are still
// being written. The kernel does not start it by itself until dirty pages
// reach a share of memory (10% by default), more than a whole workspace on
// most machines, so the final syncfs wrote everything at the end, one
// disk at a time, while the CPUs waited. Each rsFlushEvery bytes written,
// one goroutine calls syncfs, which writes back what is dirty by then in
// large batches across files (per-file sync_file_range for every file,
// tried before, made many small writes and cost more system time than it
// saved; only large files are written back one by one, by rsWriteBacks).
// The final syncfs in Run still makes the tree durable.
//
// An error from an early syncfs is kept and reported: syncfs reports a
// writeback error once per descriptor, so the final call would not see it.
type rsFlusher struct {
	fd      int
	written atomic.Int64
	kick    chan struct{}
	done    chan struct{}
	err     error // the first syncfs error; read after stop
}

// rsFlushEvery is how many bytes written start another writeback. On the
// bench corpus (840 MB, 100,000 files) restores took 4.98 s median with
// only the final syncfs, 4.65 s with a writeback every 128 MiB, 4.78 s
// every 256 MiB and 4.66 s every 512 MiB (three interleaved runs each).
var rsFlushEvery int64 = 128 << 20 // a variable for tests

// rsSyncfs is unix.Syncfs; tests make it fail.
var rsSyncfs = unix.Syncfs

func newRsFlusher(fd int) *rsFlusher {
	f := &rsFlusher{fd: fd, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go f.run()
	return f
}

func (f *rsFlusher) run() {
	defer close(f.done)
	for range f.kick {
		if err := rsSyncfs(f.fd); err != nil && f.err == nil {
			f.err = err
		}
	}
}

// wrote counts n more bytes written and starts a writeback when they
// cross a multiple of rsFlushEvery (at most one waits while one runs).
// A nil f does nothing.
func (f *rsFlusher) wrote(n int) {
	if f == nil { // a graft's writer: its tree is synced with the rest
		return
	}
	w := f.written.Add(int64(n))
	if w/rsFlushEvery != (w-int64(n))/rsFlushEvery {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// stop waits for a running writeback and returns the first error.
func (f *rsFlusher) stop() error {
	close(f.kick)
	<-f.done
	return f.err
}

// rsWriteBackMin is the size from which a restored file is written back
// on its own and dropped from the page cache as soon as it is complete
// (rsWriteBacks).
const rsWriteBackMin = 1 << 20

// rsSyncFileRange is unix.SyncFileRange; tests replace it (a test that
// does must not run in parallel).
var rsSyncFileRange = unix.SyncFileRange

// rsWriteBacks writes each complete large file of a restore to the disk,
// waits for it and drops its pages from the page cache, so that the files
// written next reuse those pages rather than take new ones. On a VM that
// hands freed memory back to its host (virtio-balloon free page
// reporting, as on the project's VMs), a page the guest has not touched
// lately costs a trip to the hypervisor, and a restore that fills the
// cache with hundreds of megabytes of new pages pays it for each one:
// restoring the bench's binaries corpus (554 MB, 74% of it in files of
// 1 MiB or more) took 1.66-2.25 s with this against 2.12-2.48 s without,
// in five interleaved pairs, with 0.4-0.6 s less system time each.
//
// Smaller files are left to the flusher's syncfs: written back one by one
// they make many small writes. The files of grafts (browser profiles) are
// left too: their databases are read back by the validation right after.
// The wait runs on a finisher, beside the pack readers; on a slow disk
// the readers wait for a free finisher, where the final syncfs would
// have made them wait at the end. On overlayfs sync_file_range writes
// nothing and the pages stay: nothing is gained, nothing lost.
//
// A writeback error (EIO, ENOSPC, EDQUOT, EROFS) is the file's, returned
// with its path; any other error (a file system or a seccomp filter that
// refuses the call) turns the writeback off for the rest of the restore.
// Either way the final syncfs still makes the tree durable and reports
// the file system's writeback errors. A nil *rsWriteBacks writes nothing
// back.
type rsWriteBacks struct {
	off atomic.Bool
}

// file writes back the complete file fd of size bytes, if it is large
// enough and the writeback is on.
func (b *rsWriteBacks) file(fd int, size int64) error {
	if b == nil || size < rsWriteBackMin || b.off.Load() {
		return nil
	}
	const all = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	err := osutil.IgnoringEINTR(func() error { return rsSyncFileRange(fd, 0, 0, all) })
	switch {
	case errors.Is(err, unix.EIO), errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, unix.EROFS):
		return err
	case err != nil:
		b.off.Store(true)
		return nil
	}
	// Advice only: a file system that keeps the pages loses nothing but
	// the reuse.
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
	return nil
}
