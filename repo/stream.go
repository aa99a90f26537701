package repo

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	"lifeboat/blob"
	"lifeboat/pack"
)

// StreamStats counts what SaveStream stored.
type StreamStats struct {
	Bytes    int64 // read from the stream
	Chunks   int
	New      int   // chunks not stored before
	NewBytes int64 // plaintext bytes of the new chunks
}

// chunkBufStart is the capacity a chunk buffer starts with: most chunks
// and most files are smaller, and the chunker grows the buffer by append
// for larger ones. Buffers go back to pack's size-class pools, so a chunk
// of a small file never holds a maximum-size (8 MiB) buffer.
const chunkBufStart = 2 << 20

// SaveStream cuts rd into content-defined chunks, with the repository's
// secret polynomial of tier t, and saves each as a data blob in tier t,
// returning the chunk ids in order.
//
// While fewer streams are being saved than GOMAXPROCS, chunking runs in
// the caller's goroutine and up to GOMAXPROCS chunks are sealed at once
// beside it, so one large file uses every core. While at least as many
// streams are saved (a capture's readers), they are taken to keep the
// cores busy (a stream waiting on its reads counts too), and the caller's
// goroutine seals each chunk itself as soon as it is cut, while it is in
// the cache of the core that read it, and holds one chunk at a time. The
// last chunk, the only one of most files, is always sealed in the
// caller's goroutine: a new goroutine would grow its stack for the sealing
// code again each time (3% of a first capture's CPU).
func (r *Repository) SaveStream(ctx context.Context, t blob.Tier, rd io.Reader) ([]blob.ID, StreamStats, error) {
	c, err := r.chunker(t)
	if err != nil {
		return nil, StreamStats{}, err
	}
	defer r.putChunker(t, c)
	var (
		mu       sync.Mutex
		st       StreamStats
		ids      []blob.ID
		firstErr error
		wg       sync.WaitGroup
	)
	procs := int64(runtime.GOMAXPROCS(0))
	sem := make(chan struct{}, procs)
	r.streams.Add(1)
	defer r.streams.Add(-1)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	// save seals chunk i, which holds a slot of sem.
	save := func(i int, data []byte) {
		defer func() { pack.PutBuffer(data); <-sem }()
		id, known, err := r.SaveBlob(ctx, t, blob.Data, data)
		if err != nil {
			fail(err)
			return
		}
		mu.Lock()
		ids[i] = id
		st.Bytes += int64(len(data))
		st.Chunks++
		if !known {
			st.New++
			st.NewBytes += int64(len(data))
		}
		mu.Unlock()
	}
	// A stream no longer than the minimum chunk size (most files) comes
	// back whole from Start, read straight into its chunk's buffer.
	head := pack.GetBuffer(c.MinSize())
	whole, done, err := c.Start(rd, head)
	switch {
	case err != nil:
		pack.PutBuffer(head)
		return nil, st, err
	case done && len(whole) == 0:
		pack.PutBuffer(head)
		return nil, st, nil
	case done:
		sem <- struct{}{}
		ids = make([]blob.ID, 1)
		save(0, whole)
		if firstErr != nil {
			return nil, st, firstErr
		}
		return ids, st, nil
	}
	defer pack.PutBuffer(head)
	var last []byte // the chunk cut last, with its slot, not yet sealed
	for i := 0; ; i++ {
		buf := pack.GetBuffer(chunkBufStart)
		data, err := c.Next(buf)
		if cap(data) != cap(buf) { // the chunk outgrew buf (or there was none)
			pack.PutBuffer(buf)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fail(err)
			}
			break
		}
		if last != nil { // not the last chunk after all: seal it beside the chunking
			if r.testStreamSeal != nil {
				r.testStreamSeal(false)
			}
			wg.Add(1)
			go func(i int, data []byte) { defer wg.Done(); save(i, data) }(i-1, last)
			last = nil
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			pack.PutBuffer(data)
			data = nil
			fail(ctx.Err())
		}
		mu.Lock()
		stop := firstErr != nil
		ids = append(ids, blob.ID{})
		mu.Unlock()
		if stop {
			if data != nil { // it took a slot, but nothing will seal it
				pack.PutBuffer(data)
			}
			break
		}
		if r.streams.Load() < procs { // hold it: the next cut tells whether it is the last
			last = data
			continue
		}
		// Other streams keep the cores busy: seal it here and now, while
		// it is in the cache of the core that read it.
		if r.testStreamSeal != nil {
			r.testStreamSeal(true)
		}
		save(i, data)
		if failed() {
			break
		}
	}
	if last != nil {
		if failed() {
			pack.PutBuffer(last)
			<-sem
		} else {
			save(len(ids)-1, last)
		}
	}
	wg.Wait()
	if firstErr != nil {
		return nil, st, firstErr
	}
	return ids, st, nil
}
