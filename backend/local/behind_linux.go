package local

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Temp files (packs, and every other object the local backend saves) are
// written through the page cache with write-behind: every behindStep
// bytes the file's writer goroutine starts the writeback of what it just
// wrote (sync_file_range), and waits for the range a step older, which
// has had a step's time to reach the disk, and drops its pages from the
// cache (posix_fadvise DONTNEED). The pages it drops are the ones the
// next writes reuse, and the final fsync finds little left to write.
//
// Two things decided it, both measured on the project's VMs:
//   - Fresh memory. A VM that hands freed memory back to the host
//     (virtio-balloon free page reporting) makes every page it has not
//     touched lately cost a trip to the hypervisor: writing packs into
//     an ever-growing page cache cost a first capture about a tenth of
//     its CPU. Dropping each range once written keeps the cache a file
//     uses to a few steps of recycled pages.
//   - Waiting for the device. Until 2026-12-01 temp files were written
//     with O_DIRECT, which avoids the page cache but makes each write
//     wait for the disk (0.2-1 ms per 256 KiB) in a system call that
//     keeps its goroutine's P (the Go scheduler's right to run code)
//     until the runtime's monitor takes it back: a first capture's cores
//     sat 4% of its time in I/O wait with work ready to run. A write
//     into the page cache returns in tens of microseconds; the device
//     time is spent by the kernel's writeback, off the capture's cores.
//
// A repository's packs are written once and read rarely, so dropping
// them from the cache also leaves it to the workspace. Durability still
// comes from the fsync before the rename (save.go).
const (
	behindBuffer = 256 << 10 // bytes per write
	behindStep   = 2 << 20   // writeback started every step, waited for a step later
)

// behindBufs recycles the write buffers: reused memory is already mapped.
var behindBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, behindBuffer)
	return &b
}}

// putBehindBuf recycles a buffer that came from behindBufs.
func putBehindBuf(b *[]byte) {
	*b = (*b)[:0]
	behindBufs.Put(b)
}

// behindFile buffers writes to a temp file in 256 KiB pieces. Full
// buffers go, in order, to a goroutine that writes them and runs the
// write-behind, while the next ones fill: the caller (a pack being
// filled, under its pack set's lock, which every sealer of the tier
// waits on) waits only when behindQueue buffers are already waiting.
//
// The *os.File is a named field, not embedded: an embedded one would give
// behindFile the file's WriteString, ReadFrom and WriteAt, which io.Copy
// and io.WriteString prefer to Write and which would bypass the buffer
// (bytes out of order).
type behindFile struct {
	File *os.File
	fd   int
	// write is File.Write and syncRange unix.SyncFileRange on fd; tests
	// swap in ones that fail.
	write     func([]byte) (int, error)
	syncRange func(off, n int64, flags int) error
	buf       *[]byte       // filling; nil once closed
	queue     chan *[]byte  // full buffers for the writer; nil while none runs
	ended     chan struct{} // closed when the writer has written its queue
	failed    atomic.Pointer[error]
	err       error // first write error the caller saw

	// The write-behind's progress, owned by the writer while it runs and
	// by the caller once it has ended: bytes written, the writeback
	// started for [0, started), and [0, dropped) written back and dropped
	// from the cache. noBehind: the write-behind is off for the file.
	written, started, dropped int64
	noBehind                  bool
}

// behindQueue is how many full buffers may wait for the writer.
const behindQueue = 4

// newBehindFile returns a file that buffers writes to f and writes
// behind them.
func newBehindFile(f *os.File) file {
	d := &behindFile{File: f, fd: int(f.Fd()), write: f.Write, buf: behindBufs.Get().(*[]byte)}
	d.syncRange = func(off, n int64, flags int) error { return unix.SyncFileRange(d.fd, off, n, flags) }
	return d
}

// Name returns the file's name.
func (d *behindFile) Name() string { return d.File.Name() }

// Write appends p, handing each full buffer to the writing goroutine. An
// error of an earlier write is returned by a later Write or by Sync.
func (d *behindFile) Write(p []byte) (int, error) {
	if d.buf == nil {
		return 0, os.ErrClosed
	}
	if d.err == nil {
		if e := d.failed.Load(); e != nil {
			d.err = *e
		}
	}
	if d.err != nil {
		return 0, d.err
	}
	n := 0
	for len(p) > 0 {
		b := *d.buf
		c := copy(b[len(b):cap(b)], p)
		*d.buf = b[:len(b)+c]
		p = p[c:]
		if len(*d.buf) == cap(*d.buf) {
			if d.queue == nil {
				d.queue, d.ended = make(chan *[]byte, behindQueue), make(chan struct{})
				go d.writer(d.queue, d.ended)
			}
			d.queue <- d.buf
			d.buf = behindBufs.Get().(*[]byte)
		}
		n += c
	}
	return n, nil
}

// writer writes the buffers of queue in order until it is closed, then
// closes ended. After a failed write it only recycles the rest.
func (d *behindFile) writer(queue <-chan *[]byte, ended chan<- struct{}) {
	defer close(ended)
	for b := range queue {
		if d.failed.Load() == nil {
			if err := d.writeOut(*b); err != nil {
				d.failed.Store(&err)
			}
		}
		putBehindBuf(b)
	}
}

// wait ends the writer, if one runs, once it has written everything
// queued, and returns the first write error.
func (d *behindFile) wait() error {
	if d.queue != nil {
		close(d.queue)
		<-d.ended
		d.queue, d.ended = nil, nil
	}
	if e := d.failed.Load(); e != nil && d.err == nil {
		d.err = *e
	}
	return d.err
}

// writeOut writes b whole, then writes behind once a step has been
// written since the last writeback started.
func (d *behindFile) writeOut(b []byte) error {
	n, err := d.write(b)
	d.written += int64(n)
	if err != nil {
		return err
	}
	if d.noBehind || d.written-d.started < behindStep {
		return nil
	}
	// Start writing back what was written since the last start. This
	// call reports no writeback error; any error it returns (not
	// supported here, refused by a system call filter) turns the
	// write-behind off, and the fsync then does all the writing.
	if d.syncRange(d.started, d.written-d.started, unix.SYNC_FILE_RANGE_WRITE) != nil {
		d.noBehind = true
		return nil
	}
	d.started = d.written
	if end := d.started - behindStep; end > d.dropped {
		// Wait for the range a step older, then drop it. The wait reports
		// a failed writeback anywhere in the file and moves this open
		// file's error cursor past it, so the fsync would not report it
		// again: every error here is a write error, and the file must not
		// be saved.
		const all = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		if err := d.syncRange(d.dropped, end-d.dropped, all); err != nil {
			return &os.PathError{Op: "write", Path: d.File.Name(), Err: fmt.Errorf("writing back to the disk: %w", err)}
		}
		_ = unix.Fadvise(d.fd, d.dropped, end-d.dropped, unix.FADV_DONTNEED) // only advice
		d.dropped = end
	}
	return nil
}

// Sync writes what is buffered, fsyncs the file and drops its pages from
// the cache.
func (d *behindFile) Sync() error {
	if d.buf == nil {
		return os.ErrClosed
	}
	if err := d.wait(); err != nil {
		return err
	}
	if b := *d.buf; len(b) > 0 {
		if d.err = d.writeOut(b); d.err != nil {
			return d.err
		}
		*d.buf = b[:0]
	}
	if err := d.File.Sync(); err != nil {
		d.err = err // a second fsync would not report it again
		return err
	}
	// All of it is clean now: drop the whole file, and with it any page
	// an earlier drop left (advice the kernel may not take at once).
	_ = unix.Fadvise(d.fd, 0, 0, unix.FADV_DONTNEED)
	d.dropped = d.written
	return nil
}

// Close waits for the writes queued, releases the buffers (what was not
// synced is lost, as with any unsynced write) and closes the file.
func (d *behindFile) Close() error {
	if d.buf != nil {
		_ = d.wait()
		putBehindBuf(d.buf)
		d.buf = nil
	}
	return d.File.Close()
}
