package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
	"lifeboat/repo"
)

// rsMaxOpen is how many restored files may stay open between writes; a
// file whose chunks are spread over packs far apart is closed and opened
// again rather than exhausting descriptors.
const rsMaxOpen = 256

var (
	rsEntryBufs = sync.Pool{New: func() any { return new([]repo.PackEntry) }}
)

// writeRun reads one run of a pack in a single request, through which
// each chunk is opened and verified, and writes each chunk wherever it
// goes. The bytes written are the very buffer StreamPack has just checked
// against the chunk's id (decrypted, decompressed, hashed): nothing else
// holds it between the check and the writes.
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
// The writer that places a file's last chunk finishes it.
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
	return w.release(f, e, int64(len(plain)), holes, werr)
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
			mode = w.createMode(e.node, f.uses == 1)
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

// release ends a write of n bytes into f; werr is its result, holes
// whether it left a hole. After the last chunk the file is handed, still
// open, to a finisher.
func (w *rsWriter) release(f *rsFile, e *rsEntry, n int64, holes bool, werr error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active--
	f.holes = f.holes || holes
	if werr != nil {
		return &Error{Paths: []string{e.path}, Err: fmt.Errorf("writing: %w", werr)}
	}
	f.left--
	f.placed += n
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

// finishFile checks that a written file holds all its bytes, writes a
// large one back (rsWriteBacks) and applies its metadata. The whole
// staging tree is made durable by one syncfs before the switch.
//
// The file is not read back. Every chunk was checked against its id in
// memory, in the buffer that was then written (writeRun), and the checks
// here and in metaFile close what a read-back of the page cache used to
// catch besides: a chunk written at the wrong place or not at all (the
// plan puts each chunk use at the sum of the lengths before it, each use
// is written once, every write completes or fails, the bytes placed must
// add up to the size, and the size on disk must be the planned one) and
// a block wrongly left as a hole (a block is skipped only when it compares
// equal to zeros, in a file created empty). A read-back never saw the
// disk itself: the bytes came from the page cache, and writeback errors
// are what a large file's writeback or the final syncfs reports.
func (w *rsWriter) finishFile(fd int, f *rsFile, e *rsEntry) error {
	if f.placed != f.size {
		return &Error{Paths: []string{e.path}, Err: fmt.Errorf("%w: %d bytes written of %d", ErrContentMismatch, f.placed, f.size)}
	}
	if f.holes { // a hole at the end is not written: the size is set here
		if err := unix.Ftruncate(fd, f.size); err != nil {
			return &Error{Paths: []string{e.path}, Err: fmt.Errorf("setting size %d: %w", f.size, err)}
		}
	}
	if w.fin.failed() == nil {
		if err := w.writeBacks.file(fd, f.size); err != nil {
			return &Error{Paths: []string{e.path}, Err: fmt.Errorf("writing back: %w", err)}
		}
	}
	if err := w.metaFile(fd, e, f.size); err != nil {
		return err
	}
	w.progress.Done(1, uint64(f.size))
	return nil
}

// rsFinishers runs file finishing (size check, a large file's writeback,
// metadata) beside the pack readers. At most cap(sem) run at once; run
// blocks when all are busy, which bounds open files.
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
