package restore

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// rsFlusher starts the staging tree's writeback while files are still
// being written. The kernel does not start it by itself until dirty pages
// reach a share of memory (10% by default), more than a whole workspace on
// most machines, so the final syncfs wrote everything at the end, one
// disk at a time, while the CPUs waited. Each rsFlushEvery bytes written,
// one goroutine calls syncfs, which writes back what is dirty by then in
// large batches across files (per-file sync_file_range, tried before, made
// many small writes and cost more system time than it saved). The final
// syncfs in Run still makes the tree durable.
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
