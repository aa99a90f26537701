package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/internal/osutil"
	"lifeboat/repo"
)

// capJob is a regular file for a reader: part.nodes[i], name in dir. h is
// dir's descriptor, held for the job. Or, with save set, part to save.
type capJob struct {
	save bool
	part *capPart
	i    int
	dir  *capDir
	h    *capHandle
	name string
	link *capLink    // set when the file has more names still to come
	st   unix.Stat_t // the walk's lstat of name: a regular file then
}

// reader runs jobs until the walker closes the queue. After a fatal error
// jobs are only released, not run.
func (c *capturer) reader() {
	for j := range c.jobs {
		if j.save {
			c.savePart(j.part)
			continue
		}
		ok := false
		if c.ctx.Err() == nil {
			ok = c.readJob(j)
		}
		j.h.release()
		if j.link != nil {
			j.link.resolve(c, ok)
		}
		c.partDone(j.part)
	}
}

// readJob fills in the file's content (from the cache or by reading it)
// and reports whether the file is in the snapshot.
func (c *capturer) readJob(j *capJob) bool {
	n := &j.part.nodes[j.i]
	if c.o.hooks.beforeOpen != nil {
		c.o.hooks.beforeOpen(j.dir.errPath(j.name))
	}
	// O_NONBLOCK: should a FIFO have taken the file's place, opening it
	// must not wait for a writer; O_NOCTTY: nor may a terminal become
	// this process's controlling terminal.
	fd, err := capOpenat(j.h.fd, j.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			err = errors.New("vanished before it could be read")
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENXIO):
			err = errors.New("replaced by a non-regular file during the capture")
		default:
			err = fmt.Errorf("opening: %w", err)
		}
		c.omit(j.dir, j.name, n, err)
		return false
	}
	defer func() { _ = unix.Close(fd) }()
	// The walk's lstat stands for a stat before the first read (one system
	// call less per file): if the name now holds another file, or the file
	// changed since, the fstat after the read differs and it is read again.
	before, after := j.st, unix.Stat_t{}
	var ids []blob.ID
	var rd *capFileReader
	changed := false
	for attempt := 1; ; attempt++ {
		if c.o.hooks.beforeRead != nil {
			c.o.hooks.beforeRead(j.dir.errPath(j.name), attempt)
		}
		rd = &capFileReader{fd: fd, counter: c.o.hooks.bytesRead, sparse: before.Blocks*512 < before.Size, size: before.Size}
		if attempt > 1 && c.prefixOK() {
			// The file changed during its first read: this one is hashed,
			// should it change again, to check it is a prefix (capPrefix).
			rd.sum = blake3.New()
		}
		var st repo.StreamStats
		ids, st, err = c.r.SaveStream(c.ctx, c.o.tier(), rd)
		if err != nil {
			if rd.err != nil && c.ctx.Err() == nil {
				c.omit(j.dir, j.name, n, capReadError(fd, rd.err))
				return false
			}
			c.fail(fmt.Errorf("capture: saving %s: %w", j.dir.errPath(j.name), err))
			return false
		}
		c.newBytes.Add(uint64(st.NewBytes))
		if c.o.hooks.afterRead != nil {
			c.o.hooks.afterRead(j.dir.errPath(j.name), attempt)
		}
		if err := unix.Fstat(fd, &after); err != nil {
			c.omit(j.dir, j.name, n, err)
			return false
		}
		if after.Mode&unix.S_IFMT != unix.S_IFREG {
			c.omit(j.dir, j.name, n, errNotRegular)
			return false
		}
		if capUnchanged(&before, &after) {
			break
		}
		if attempt == 2 {
			changed = true
			break
		}
		before = after
	}
	// A file that changed during both reads is kept as a prefix when it
	// only grew (an appended log) and its second read is verified to be
	// its first bytes as the fstat after that read found it; any other
	// change is an error.
	prefix := false
	var prefixErr error
	if changed && rd.sum != nil {
		prefix, prefixErr = capPrefix(c.ctx, fd, rd, before.Size, &after)
	}
	c.setMeta(n, &after)
	n.Size = uint64(rd.n)
	n.Content = ids
	var xerr error
	if n.Xattrs, xerr = capXattrsFd(fd); xerr != nil {
		c.record(j.dir.errPath(j.name), xerr)
	}
	switch {
	case prefix:
		c.prefix(j.dir.errPath(j.name), n.Size, uint64(after.Size))
	case changed:
		err := errors.New("changed while being read; the snapshot holds its second read")
		if prefixErr != nil {
			err = fmt.Errorf("%w (checking it as a prefix: %w)", err, prefixErr)
		}
		c.record(j.dir.errPath(j.name), err)
	// Cache only files whose last change, of content (mtime) or inode
	// (ctime), is well before the capture began: a file changed again
	// within the timestamps' granularity would otherwise look unchanged.
	case c.o.Cache != nil && xerr == nil && c.settled(j.dir, &after) && len(ids) > 0 && n.Size == uint64(after.Size):
		c.cacheNote(j.part, j.i, capCacheEntry(&after, len(n.Xattrs) > 0, ids), true)
	}
	c.bytes.Add(n.Size)
	c.o.Progress.Done(1, n.Size)
	return true
}

// errNotRegular is recorded for a file whose name held something else
// (a directory, a FIFO) by the time a reader opened it.
var errNotRegular = errors.New("replaced by a non-regular file during the capture")

// capReadError is the error to record for a file open as fd whose read
// failed with err: errNotRegular when fd is no longer a regular file (a
// directory fails with EISDIR, a FIFO with ESPIPE).
func capReadError(fd int, err error) error {
	if capRegular(fd) == errNotRegular {
		return errNotRegular
	}
	return fmt.Errorf("reading: %w", err)
}

// capRegular checks with fstat that fd is a regular file: errNotRegular
// when it is not, fstat's error when that fails.
func capRegular(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errNotRegular
	}
	return nil
}

// capUnchanged reports whether a file's content may be taken as unchanged
// between two fstats of one descriptor.
func capUnchanged(a, b *unix.Stat_t) bool {
	return a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// capPrefix reports whether the second read of a file that changed
// during both reads, rd, holds exactly the file's first rd.n bytes as they
// were when that read ended: the file only grew (it had at least as many
// bytes as the fstat before the read, size, said; and after, the fstat
// after it, says at least rd.n), and a third read of those bytes, started
// after that fstat, hashes to the same as rd's. Each byte then had the
// same value when rd read it and when it was read again, so it had that
// value at the fstat between the two. A change undone before the third
// read reaches it is not seen. The descriptor is the one read, so it is
// the same file (inode) throughout.
func capPrefix(ctx context.Context, fd int, rd *capFileReader, size int64, after *unix.Stat_t) (bool, error) {
	if rd.n < size || after.Size < rd.n {
		return false, nil // it shrank: not an append
	}
	want := rd.sum.Sum(nil)
	h := blake3.New()
	buf := make([]byte, min(max(rd.n, 1), 1<<20))
	for off := int64(0); off < rd.n; {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		m, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.Pread(fd, buf[:min(int64(len(buf)), rd.n-off)], off) })
		if err != nil {
			return false, err
		}
		if m == 0 {
			return false, nil // it shrank below rd.n
		}
		_, _ = h.Write(buf[:m])
		off += int64(m)
		if rd.counter != nil {
			rd.counter.Add(int64(m))
		}
	}
	return bytes.Equal(h.Sum(nil), want), nil
}

// capFileReader reads a file from offset 0 with pread, remembering its
// own error so a read failure (the file's problem) can be told apart from
// a repository failure (fatal). In a sparse file it finds the holes with
// SEEK_DATA/SEEK_HOLE and returns their zeros without reading them.
type capFileReader struct {
	fd      int
	n       int64 // bytes read
	err     error
	counter *atomic.Int64
	sum     *blake3.Hasher // when set, hashes every byte read (capPrefix)
	limit   int64          // when > 0, the read ends there (see Read)

	sparse  bool  // look for holes
	dataEnd int64 // [n, dataEnd) is data: pread it
	holeEnd int64 // [n, holeEnd) is a hole: zeros
	size    int64 // as the walk's lstat said before the read
	eof     bool  // the end was found: later reads do not ask again
	past    bool  // read past size: fd was checked to be a regular file
}

// Read reads the file from where the last read ended. Once it finds the
// end, later reads return io.EOF without a system call: the chunker asks
// again after the end, which cost every small file three more preads. A
// short read that ends at the size the walk's lstat gave is the end too (one pread
// for a small file, not two). The fstat after reading catches a file that
// grew meanwhile, and a file whose size fstat does not know (some special
// filesystems say 0) is read until a pread returns nothing. A file that
// grows past size is read up to the size fstat gives when the read passes
// size, no further: a writer that appends faster than the capture reads
// cannot make the read endless (the file changed; the fstat after the
// read sees it).
func (r *capFileReader) Read(p []byte) (int, error) {
	if r.eof {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.limit > 0 {
		if r.n >= r.limit {
			r.eof = true
			return 0, io.EOF
		}
		p = p[:min(int64(len(p)), r.limit-r.n)]
	}
	if r.sparse && r.n >= r.dataEnd && r.n >= r.holeEnd {
		r.findExtent()
	}
	if r.n < r.holeEnd {
		n := int(min(int64(len(p)), r.holeEnd-r.n))
		clear(p[:n])
		r.took(p[:n])
		return n, nil
	}
	if r.sparse && r.n < r.dataEnd {
		p = p[:min(int64(len(p)), r.dataEnd-r.n)]
	}
	n, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.Pread(r.fd, p, r.n) })
	if err != nil {
		r.err = err
		return 0, err
	}
	if n == 0 {
		r.eof = true
		return 0, io.EOF
	}
	r.took(p[:n])
	if r.n > r.size && !r.past {
		// No fstat came before the read (the walk's lstat stood in):
		// a device in the file's place (/dev/zero) would never end.
		r.past = true
		var st unix.Stat_t
		if r.err = unix.Fstat(r.fd, &st); r.err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
			r.err = errNotRegular
		}
		if r.err != nil {
			return 0, r.err
		}
		if st.Size >= r.n { // 0 when unknown: no limit
			r.limit = st.Size
		}
	}
	r.eof = n < len(p) && r.n == r.size
	return n, nil
}

// took counts b, just read, and hashes it when asked to.
func (r *capFileReader) took(b []byte) {
	r.n += int64(len(b))
	if r.counter != nil {
		r.counter.Add(int64(len(b)))
	}
	if r.sum != nil {
		_, _ = r.sum.Write(b)
	}
}

// findExtent sets dataEnd or holeEnd for the extent at offset n. Where
// the filesystem cannot tell, it stops looking and reads everything.
func (r *capFileReader) findExtent() {
	data, err := unix.Seek(r.fd, r.n, unix.SEEK_DATA)
	if err == unix.ENXIO { // no data after n: a hole up to the current size
		var st unix.Stat_t
		if unix.Fstat(r.fd, &st) == nil && st.Size > r.n {
			r.holeEnd = st.Size
			return
		}
		r.sparse = false // at the end: pread says EOF
		return
	}
	if err != nil {
		r.sparse = false
		return
	}
	if data > r.n {
		r.holeEnd = data
		return
	}
	hole, err := unix.Seek(r.fd, r.n, unix.SEEK_HOLE)
	if err != nil || hole <= r.n {
		r.sparse = false
		return
	}
	r.dataEnd = hole
}
