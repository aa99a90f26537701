package local

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Temp files are written with direct I/O (O_DIRECT) where the filesystem
// takes it: their bytes go from reused, aligned buffers to the disk
// instead of being copied into newly allocated page-cache pages.
//
// A repository's packs are written once and read rarely, so caching them
// only evicts pages the rest of the machine wants. And on virtual machines
// that hand freed memory back to the host (virtio-balloon free page
// reporting), every fresh page costs a trip to the hypervisor on first
// touch: there, writing a pack through the page cache ran at about 270 MB/s
// of CPU time, and copying into those pages was a tenth of a first
// capture's CPU. Direct writes of the same data took a fifth of the time,
// mostly in the device.
//
// Direct I/O needs the buffer, the file offset and the length aligned to
// the device's block; directAlign (4 KiB) suits every common device. The
// last, partial block is written after clearing O_DIRECT, before the
// fsync. A filesystem that refuses O_DIRECT, or refuses a direct write
// (EINVAL), gets the remaining bytes through the page cache instead.
const (
	directAlign  = 4 << 10
	directBuffer = 256 << 10
)

// directBufs recycles aligned buffers: reused memory is already mapped.
var directBufs = sync.Pool{New: func() any {
	b := make([]byte, directBuffer+directAlign)
	off := int(directAlign-addr(b)%directAlign) % directAlign
	b = b[off : off : off+directBuffer]
	return &b
}}

// addr is the address of b's first byte, for alignment checks.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// putDirectBuf recycles a buffer that came from directBufs.
func putDirectBuf(b *[]byte) {
	if cap(*b) == directBuffer && addr(*b)%directAlign == 0 {
		*b = (*b)[:0]
		directBufs.Put(b)
	}
}

// directFile buffers writes to an O_DIRECT file in whole aligned blocks.
// Full buffers go, in order, to a goroutine that writes them while the
// next ones fill: the caller (a pack being filled, under its pack set's
// lock, which every sealer of the tier waits on) waits on the device only
// when directQueue buffers are already waiting for it.
//
// The *os.File is a named field, not embedded: an embedded one would give
// directFile the file's WriteString, ReadFrom and WriteAt, which io.Copy
// and io.WriteString prefer to Write and which would bypass the buffer
// (bytes out of order, or unaligned direct writes refused).
type directFile struct {
	File  *os.File
	write func([]byte) (int, error) // File.Write; tests swap in one that fails
	buf   *[]byte                   // filling; nil once closed
	queue chan *[]byte              // full buffers for the writer; nil while none runs
	ended chan struct{}             // closed when the writer has written its queue
	// direct: O_DIRECT is set. The writer owns it while it runs, the
	// caller once it has ended.
	direct bool
	failed atomic.Pointer[error] // the writer's first error
	err    error                 // first write error the caller saw
}

// directQueue is how many full buffers may wait for the writer: a write
// of 256 KiB takes 0.3-1 ms on the project's VMs, and a pack fills
// faster than that while several readers seal into it.
const directQueue = 4

// newDirectFile sets O_DIRECT on f and returns a file that buffers for
// it; where O_DIRECT cannot be set it returns f itself.
func newDirectFile(f *os.File) file {
	if setDirect(f, true) != nil {
		return f
	}
	return &directFile{File: f, write: f.Write, buf: directBufs.Get().(*[]byte), direct: true}
}

// Name returns the file's name.
func (d *directFile) Name() string { return d.File.Name() }

// setDirect sets or clears O_DIRECT on f's descriptor.
func setDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		var fl int
		if fl, serr = unix.FcntlInt(fd, unix.F_GETFL, 0); serr != nil {
			return
		}
		if on {
			fl |= unix.O_DIRECT
		} else {
			fl &^= unix.O_DIRECT
		}
		_, serr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	})
	return errors.Join(err, serr)
}

// Write appends p, handing each full buffer to the writing goroutine. An
// error of an earlier write is returned by a later Write or by Sync.
func (d *directFile) Write(p []byte) (int, error) {
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
				d.queue, d.ended = make(chan *[]byte, directQueue), make(chan struct{})
				go d.writer(d.queue, d.ended)
			}
			d.queue <- d.buf
			d.buf = directBufs.Get().(*[]byte)
		}
		n += c
	}
	return n, nil
}

// writer writes the buffers of queue in order until it is closed, then
// closes ended. After a failed write it only recycles the rest.
func (d *directFile) writer(queue <-chan *[]byte, ended chan<- struct{}) {
	defer close(ended)
	for b := range queue {
		if d.failed.Load() == nil {
			if err := d.writeOut(*b); err != nil {
				d.failed.Store(&err)
			}
		}
		putDirectBuf(b)
	}
}

// wait ends the writer, if one runs, once it has written everything
// queued, and returns the first write error.
func (d *directFile) wait() error {
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

// writeOut writes b whole: directly while O_DIRECT is set (len(b) is then
// a multiple of directAlign), else through the page cache.
func (d *directFile) writeOut(b []byte) error {
	n, err := d.write(b)
	if d.direct && errors.Is(err, syscall.EINVAL) {
		// The filesystem or device refuses this direct write (an
		// alignment it does not take): write through the page cache
		// what did not reach the file.
		if err = setDirect(d.File, false); err == nil {
			d.direct = false
			_, err = d.write(b[n:])
		}
	}
	return err
}

// Sync writes what is buffered, the partial last block through the page
// cache, then fsyncs the file.
func (d *directFile) Sync() error {
	if d.buf == nil {
		return os.ErrClosed
	}
	if err := d.wait(); err != nil {
		return err
	}
	b := *d.buf
	if whole := len(b) &^ (directAlign - 1); d.direct && whole > 0 {
		if d.err = d.writeOut(b[:whole]); d.err != nil {
			return d.err
		}
		b = b[:copy(b, b[whole:])]
	}
	if len(b) > 0 {
		if d.direct {
			if d.err = setDirect(d.File, false); d.err != nil {
				return d.err
			}
			d.direct = false
		}
		if d.err = d.writeOut(b); d.err != nil {
			return d.err
		}
	}
	*d.buf = b[:0]
	return d.File.Sync()
}

// Close waits for the writes queued, releases the buffers (what was not
// synced is lost, as with any unsynced write) and closes the file.
func (d *directFile) Close() error {
	if d.buf != nil {
		_ = d.wait()
		putDirectBuf(d.buf)
		d.buf = nil
	}
	return d.File.Close()
}
