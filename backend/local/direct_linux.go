package local

import (
	"errors"
	"os"
	"sync"
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
// A full buffer is written by a goroutine while the next one fills, so
// the caller (a pack being filled, under its lock) does not wait on the
// device; one write is in flight at a time, which keeps them in order.
//
// The *os.File is a named field, not embedded: an embedded one would give
// directFile the file's WriteString, ReadFrom and WriteAt, which io.Copy
// and io.WriteString prefer to Write and which would bypass the buffer
// (bytes out of order, or unaligned direct writes refused).
type directFile struct {
	File   *os.File
	write  func([]byte) (int, error) // File.Write; tests swap in one that fails
	buf    *[]byte                   // filling; nil once closed
	flying *[]byte                   // being written; nil when no write is in flight
	result chan error                // the flying write's result
	direct bool                      // O_DIRECT is set; touched only between writes
	err    error                     // first write error
}

// newDirectFile sets O_DIRECT on f and returns a file that buffers for
// it; where O_DIRECT cannot be set it returns f itself.
func newDirectFile(f *os.File) file {
	if setDirect(f, true) != nil {
		return f
	}
	return &directFile{File: f, write: f.Write, buf: directBufs.Get().(*[]byte), result: make(chan error, 1), direct: true}
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

// Write appends p, handing each full buffer to a writing goroutine. An
// error of an earlier write is returned by a later Write or by Sync.
func (d *directFile) Write(p []byte) (int, error) {
	if d.buf == nil {
		return 0, os.ErrClosed
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
			if err := d.wait(); err != nil {
				return n, err
			}
			d.flying, d.buf = d.buf, directBufs.Get().(*[]byte)
			go func(b []byte) { d.result <- d.writeOut(b) }(*d.flying)
		}
		n += c
	}
	return n, nil
}

// wait waits for the write in flight, if any, and recycles its buffer.
func (d *directFile) wait() error {
	if d.flying != nil {
		err := <-d.result
		putDirectBuf(d.flying)
		d.flying = nil
		if err != nil && d.err == nil {
			d.err = err
		}
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

// Close waits for a write in flight, releases the buffers (what was not
// synced is lost, as with any unsynced write) and closes the file.
func (d *directFile) Close() error {
	if d.buf != nil {
		_ = d.wait()
		putDirectBuf(d.buf)
		d.buf = nil
	}
	return d.File.Close()
}
