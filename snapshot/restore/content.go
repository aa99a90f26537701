package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/internal/osutil"
	"lifeboat/repo"
)

// rsMaxOpen is how many restored files may stay open between writes; a
// file whose chunks are spread over packs far apart is closed and opened
// again rather than exhausting descriptors.
const rsMaxOpen = 256

var (
	rsEntryBufs = sync.Pool{New: func() any { return new([]repo.PackEntry) }}
	rsReadBufs  = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}
)

// hasher returns a keyed BLAKE3 hasher for chunk ids, reset; put it back
// in w.hashers.
func (w *rsWriter) hasher() (*blake3.Hasher, error) {
	if h, ok := w.hashers.Get().(*blake3.Hasher); ok {
		h.Reset()
		return h, nil
	}
	return blake3.NewKeyed(w.keys.IDKey[:])
}

// writeRun reads one run of a pack in a single request, through which
// each chunk is opened and verified, and writes each chunk wherever it
// goes.
func (w *rsWriter) writeRun(ctx context.Context, run *rsRun) error {
	ep := rsEntryBufs.Get().(*[]repo.PackEntry)
	defer rsEntryBufs.Put(ep)
	es := (*ep)[:0]
	if cap(es) < len(run.chunks) {
		es = make([]repo.PackEntry, 0, len(run.chunks))
	}
	for _, c := range run.chunks {
		es = append(es, c.loc.Entry)
	}
	*ep = es
	err := w.store.StreamPack(ctx, w.keys.Tier, run.pack, es, repo.StreamOptions{}, func(i int, _, plain []byte) error {
		for _, u := range run.chunks[i].uses {
			if err := w.place(u, plain); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return nil
	}
	var se *repo.StreamError // declared only here: errors.As moves it to the heap
	switch {
	case !errors.As(err, &se):
		return err
	case se.Verify:
		c := run.chunks[se.Index]
		return &Error{Paths: w.plan.filesOf(c), Err: fmt.Errorf("chunk %s: %w; run `lifeboat check --read-data`", c.id.Short(), se.Err)}
	}
	return &Error{Paths: w.plan.filesOf(run.chunks[se.Index : se.Index+se.Count]...), Err: fmt.Errorf("reading %d chunks: %w; run `lifeboat check`", se.Count, se.Err)}
}

// place writes one chunk into one file. Blocks of zeros are not written
// and stay holes; finishFile sets the size of a file that has any.
// The writer that places a file's last chunk verifies and finishes it.
func (w *rsWriter) place(u rsUse, plain []byte) error {
	f := w.plan.files[u.file]
	e := &w.plan.entries[f.entry]
	fd, err := w.acquire(f, e)
	if err != nil {
		return err
	}
	holes, werr := rsWriteSparse(fd, plain, u.off)
	if werr == nil {
		w.flusher.wrote(len(plain))
	}
	return w.release(f, e, holes, werr)
}

// acquire opens f for writing (creating it the first time) and holds it.
func (w *rsWriter) acquire(f *rsFile, e *rsEntry) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd < 0 {
		pfd, err := w.dirs.get(e.parent)
		if err != nil {
			return -1, &Error{Paths: []string{e.path}, Err: err}
		}
		flags, mode := unix.O_RDWR, uint32(0)
		if !f.created {
			flags |= unix.O_CREAT | unix.O_EXCL
			mode = w.createMode(e.node)
		}
		fd, err := safeOpenAt(pfd, e.name, flags, mode)
		w.dirs.put(e.parent)
		if err != nil {
			return -1, &Error{Paths: []string{e.path}, Err: fmt.Errorf("creating file: %w", err)}
		}
		f.created = true
		f.fd = fd
		w.open.Add(1)
	}
	f.active++
	return f.fd, nil
}

// release ends a write of f; werr is its result, holes whether it left
// a hole. After the last chunk the file is handed, still open, to a
// finisher.
func (w *rsWriter) release(f *rsFile, e *rsEntry, holes bool, werr error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active--
	f.holes = f.holes || holes
	if werr != nil {
		return &Error{Paths: []string{e.path}, Err: fmt.Errorf("writing: %w", werr)}
	}
	f.left--
	if f.left > 0 {
		if f.active == 0 && w.open.Load() > rsMaxOpen {
			_ = unix.Close(f.fd)
			f.fd = -1
			w.open.Add(-1)
		}
		return nil
	}
	fd := f.fd
	f.fd = -1 // the finisher owns it now
	return w.fin.run(func() error {
		defer func() {
			_ = unix.Close(fd)
			w.open.Add(-1)
		}()
		return w.finishFile(fd, f, e)
	})
}

// finishFile verifies a written file and applies its metadata. The whole
// staging tree is made durable at once, by one syncfs, before the switch.
func (w *rsWriter) finishFile(fd int, f *rsFile, e *rsEntry) error {
	if f.holes { // a hole at the end is not written: the size is set here
		if err := unix.Ftruncate(fd, f.size); err != nil {
			return &Error{Paths: []string{e.path}, Err: fmt.Errorf("setting size %d: %w", f.size, err)}
		}
	}
	if err := w.verify(fd, e, f.holes); err != nil {
		return err
	}
	if err := w.metaFD(fd, e); err != nil {
		return err
	}
	w.progress.Done(1, uint64(f.size))
	return nil
}

// rsFinishers runs file finishing (read-back, metadata, fsync) beside the
// pack readers, so a slow fsync does not stall reading. At most cap(sem)
// run at once; run blocks when all are busy, which bounds open files.
type rsFinishers struct {
	sem chan struct{}
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

func newRsFinishers(n int) *rsFinishers {
	return &rsFinishers{sem: make(chan struct{}, n)}
}

// run starts fn on a finisher and returns the first error any finisher
// has met so far (so pack readers stop early).
func (f *rsFinishers) run(fn func() error) error {
	f.sem <- struct{}{}
	f.wg.Add(1)
	go func() {
		defer func() { <-f.sem; f.wg.Done() }()
		if err := fn(); err != nil {
			f.mu.Lock()
			if f.err == nil {
				f.err = err
			}
			f.mu.Unlock()
		}
	}()
	return f.failed()
}

// failed returns the first error, if any.
func (f *rsFinishers) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// wait waits for every finisher and returns the first error.
func (f *rsFinishers) wait() error {
	f.wg.Wait()
	return f.failed()
}

// verify reads the file back and checks every chunk range against its
// id, so a fault between decryption and the disk cannot go unnoticed.
// In a file with holes, a range that is a hole reads as zeros without
// being read.
func (w *rsWriter) verify(fd int, e *rsEntry, holes bool) error {
	h, err := w.hasher()
	if err != nil {
		return err
	}
	defer w.hashers.Put(h)
	bp := rsReadBufs.Get().(*[]byte)
	defer rsReadBufs.Put(bp)
	buf := *bp
	var off int64
	for _, id := range e.node.Content {
		n := int64(w.plan.chunks[id].loc.PlainLen)
		var got blob.ID
		if holes && osutil.IsHole(fd, off, n) {
			got = w.zeroID(n)
		} else {
			h.Reset()
			for pos := off; pos < off+n; {
				k, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.Pread(fd, buf[:min(int64(len(buf)), off+n-pos)], pos) })
				if err != nil || k == 0 {
					return &Error{Paths: []string{e.path}, Err: fmt.Errorf("reading back for verification at offset %d: %v", pos, rsOr(err, "unexpected end of file"))}
				}
				_, _ = h.Write(buf[:k])
				pos += int64(k)
			}
			h.Sum(got[:0])
		}
		if got != id {
			return &Error{Paths: []string{e.path}, Err: fmt.Errorf("%w: bytes %d-%d read back do not hash to chunk %s", ErrContentMismatch, off, off+n, id.Short())}
		}
		off += n
	}
	return nil
}

// zeroID is the id of n zero bytes, computed once per length.
func (w *rsWriter) zeroID(n int64) blob.ID {
	w.zeroMu.Lock()
	defer w.zeroMu.Unlock()
	if id, ok := w.zeroIDs[n]; ok {
		return id
	}
	h, _ := blake3.NewKeyed(w.keys.IDKey[:])
	for left := n; left > 0; {
		k := min(left, int64(len(rsZeros)))
		_, _ = h.Write(rsZeros[:k])
		left -= k
	}
	var id blob.ID
	h.Sum(id[:0])
	w.zeroIDs[n] = id
	return id
}

var rsZeros [64 << 10]byte

// rsBlock is the granularity of holes: file system blocks are 4 KiB.
const rsBlock = 4096

// rsWriteSparse writes b at off in fd, skipping every block-aligned run
// of zeros (aligned to file offsets, so a skipped block is a whole file
// system block and stays a hole), and reports whether it skipped any.
func rsWriteSparse(fd int, b []byte, off int64) (holes bool, err error) {
	run := -1 // start of the pending run of data blocks
	for i := 0; i < len(b); {
		end := min(len(b), int((off+int64(i))/rsBlock*rsBlock+rsBlock-off))
		if bytes.Equal(b[i:end], rsZeros[:end-i]) {
			holes = true
			if run >= 0 {
				if err := rsPwrite(fd, b[run:i], off+int64(run)); err != nil {
					return holes, err
				}
				run = -1
			}
		} else if run < 0 {
			run = i
		}
		i = end
	}
	if run >= 0 {
		return holes, rsPwrite(fd, b[run:], off+int64(run))
	}
	return holes, nil
}

// rsPwrite writes all of b at off.
func rsPwrite(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		k, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.Pwrite(fd, b, off) })
		if err != nil {
			return err
		}
		b, off = b[k:], off+int64(k)
	}
	return nil
}

func rsOr(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}
