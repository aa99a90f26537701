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
// takes it: their bytes go from one reused, aligned buffer to the disk
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
	directBuffer = 1 << 20
)

// directBufs recycles aligned buffers: reused memory is already mapped.
var directBufs = sync.Pool{New: func() any {
	b := make([]byte, directBuffer+directAlign)
	off := int(directAlign-uintptr(unsafe.Pointer(&b[0]))%directAlign) % directAlign
	b = b[off : off : off+directBuffer]
	return &b
}}

// directFile buffers writes to an O_DIRECT file in whole aligned blocks.
type directFile struct {
	*os.File
	buf    *[]byte // nil once released
	direct bool    // O_DIRECT is set on the descriptor
	err    error   // first write error
}

// newDirectFile sets O_DIRECT on f and returns a file that buffers for
// it; where O_DIRECT cannot be set it returns f itself.
func newDirectFile(f *os.File) file {
	if setDirect(f, true) != nil {
		return f
	}
	return &directFile{File: f, buf: directBufs.Get().(*[]byte), direct: true}
}

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

// Write appends p, writing each full buffer to the file.
func (d *directFile) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	if d.buf == nil {
		return 0, os.ErrClosed
	}
	n := 0
	for len(p) > 0 {
		b := *d.buf
		c := copy(b[len(b):cap(b)], p)
		*d.buf = b[:len(b)+c]
		n += c
		p = p[c:]
		if len(*d.buf) == cap(*d.buf) {
			if err := d.flush(len(*d.buf)); err != nil {
				return n - c, err
			}
		}
	}
	return n, nil
}

// flush writes the first n bytes of the buffer (a multiple of directAlign
// while direct) and keeps the rest at its start.
func (d *directFile) flush(n int) error {
	b := *d.buf
	_, err := d.File.Write(b[:n])
	if d.direct && errors.Is(err, syscall.EINVAL) {
		// The filesystem or device refuses this direct write (an
		// alignment it does not take): write through the page cache.
		if err = setDirect(d.File, false); err == nil {
			d.direct = false
			_, err = d.File.Write(b[:n])
		}
	}
	if err != nil {
		d.err = err
		return err
	}
	*d.buf = b[:copy(b, b[n:])]
	return nil
}

// Sync writes what is buffered, the partial last block through the page
// cache, then fsyncs the file.
func (d *directFile) Sync() error {
	if d.err != nil {
		return d.err
	}
	if d.buf == nil {
		return os.ErrClosed
	}
	if whole := len(*d.buf) &^ (directAlign - 1); whole > 0 && d.direct {
		if err := d.flush(whole); err != nil {
			return err
		}
	}
	if len(*d.buf) > 0 {
		if d.direct {
			if err := setDirect(d.File, false); err != nil {
				d.err = err
				return err
			}
			d.direct = false
		}
		if err := d.flush(len(*d.buf)); err != nil {
			return err
		}
	}
	return d.File.Sync()
}

// Close releases the buffer (what it held and was not synced is lost,
// as with any unsynced write) and closes the file.
func (d *directFile) Close() error {
	if d.buf != nil {
		*d.buf = (*d.buf)[:0]
		directBufs.Put(d.buf)
		d.buf = nil
	}
	return d.File.Close()
}
