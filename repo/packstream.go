package repo

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/pack"
)

// PackEntry is a blob's entry in a pack: its type, flags and id, where its
// sealed bytes lie, and its plaintext length.
type PackEntry = pack.Entry

// Location is where a blob is stored: its pack and its entry there.
type Location = index.Location

// StreamOptions shape StreamPack's reads.
type StreamOptions struct {
	// Gap is how many unneeded bytes between two wanted blobs are read
	// rather than starting another request; MaxRead is the most one
	// request reads (a longer blob is read alone). Both zero: the wanted
	// blobs are read in one request.
	Gap, MaxRead int
	// Copy is for copying blobs as they are stored (prune's repack): fn
	// gets each blob's sealed bytes and no plaintext, and the blobs of a
	// request are opened and verified on up to GOMAXPROCS goroutines,
	// ahead of fn, a group at a time.
	Copy bool
}

// StreamError is a StreamPack failure about es[Index:Index+Count]: a read
// of the pack that failed (Count is the number of blobs it was to hold),
// or, with Verify, one blob that does not verify. Err wraps ErrPackMissing
// for a missing pack and ErrCorrupt for a truncated one or a blob that
// does not verify.
type StreamError struct {
	Index, Count int
	Verify       bool
	Err          error
}

func (e *StreamError) Error() string { return e.Err.Error() }
func (e *StreamError) Unwrap() error { return e.Err }

// StreamPack reads the blobs es of pack id, which holds blobs of tier t,
// and calls fn with each in the order of es (by offset): its index in es,
// then with o.Copy its sealed bytes as stored (and nil), else nil and its
// plaintext, decrypted, decompressed and checked against its id. fn is
// called from the caller's goroutine and must not keep either slice.
// Memory stays at one request's bytes and a plaintext buffer per
// goroutine, all recycled.
//
// A request that fails, or a blob that does not verify, ends the call
// with a *StreamError; fn has then been called for every blob before it
// and for none after. fn's error, and ctx's, are returned as they are.
func (r *Repository) StreamPack(ctx context.Context, t blob.Tier, id blob.ID, es []PackEntry, o StreamOptions,
	fn func(i int, sealed, plain []byte) error) error {
	k, err := r.keys.Tier(t)
	if err != nil {
		return err
	}
	h := backend.Handle{Type: backend.Pack, Name: id.String()}
	for i := 0; i < len(es); {
		n, start, end := streamSpan(es[i:], o)
		if err := r.streamRequest(ctx, k, h, es, i, n, start, end, o.Copy, fn); err != nil {
			return err
		}
		i += n
	}
	return nil
}

// streamSpan returns how many blobs at the start of es one request reads,
// and the byte range it reads. A blob that starts before the end of the
// one before it (a damaged or repeated entry) starts a new request.
func streamSpan(es []PackEntry, o StreamOptions) (n int, start, end int64) {
	start, end = int64(es[0].Offset), int64(es[0].Offset)+int64(es[0].Length)
	bounded := o.Gap != 0 || o.MaxRead != 0
	for n = 1; n < len(es); n++ {
		s, e := int64(es[n].Offset), int64(es[n].Offset)+int64(es[n].Length)
		if s < end || bounded && (s-end > int64(o.Gap) || e-start > int64(o.MaxRead)) {
			break
		}
		end = e
	}
	return n, start, end
}

// streamPlainBufs recycles StreamPack's plaintext buffers.
var streamPlainBufs = sync.Pool{New: func() any { return new([]byte) }}

// streamRequest reads es[i:i+n], which lie in [start, end) of the pack, in
// one request and hands them to fn.
func (r *Repository) streamRequest(ctx context.Context, k *crypt.TierKeys, h backend.Handle, es []PackEntry, i, n int, start, end int64,
	copying bool, fn func(i int, sealed, plain []byte) error) error {
	// The request's sealed bytes go into a recycled buffer: a restore
	// reads the whole repository, and fresh buffers for it kept the
	// garbage collector busy (a fifth of a restore's user CPU).
	size := int(end - start)
	data, err := backend.LoadRange(ctx, r.be, h, start, size, pack.GetBuffer(size))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		switch {
		case errors.Is(err, backend.ErrNotFound):
			err = fmt.Errorf("%w: %s: %w", ErrPackMissing, h, err)
		case errors.Is(err, backend.ErrShortRead):
			err = fmt.Errorf("%w: %s is truncated (blob %s lies past its end): %w", ErrCorrupt, h, es[i+n-1].ID.Short(), err)
		default:
			err = fmt.Errorf("loading %s: %w", h, err)
		}
		return &StreamError{Index: i, Count: n, Err: err}
	}
	defer pack.PutBuffer(data)
	if copying {
		return streamVerified(ctx, k, h, es, i, n, data, start, fn)
	}
	bp := streamPlainBufs.Get().(*[]byte)
	defer streamPlainBufs.Put(bp)
	for j := i; j < i+n; j++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		// The request's buffer is this call's own: each blob is decrypted
		// where it lies, and an uncompressed one's plaintext is handed
		// over from there, with no copy and no buffer of its own.
		e := &es[j]
		plain, err := pack.OpenVerifiedInPlace(k, *e, sealedIn(data, start, e), *bp)
		if err != nil {
			return &StreamError{Index: j, Count: 1, Verify: true, Err: notVerified(h, e, err)}
		}
		if e.Flags&pack.FlagZstd != 0 {
			*bp = plain[:0] // decompressed into *bp, or a larger buffer that replaces it
		}
		if err := fn(j, nil, plain); err != nil {
			return err
		}
	}
	return nil
}

// sealedIn returns e's sealed bytes in data, the pack's bytes from start.
func sealedIn(data []byte, start int64, e *PackEntry) []byte {
	lo, hi := int64(e.Offset)-start, int64(e.Offset)-start+int64(e.Length)
	return data[lo:hi:hi] // no capacity into the next blob: an append must not overwrite it
}

// notVerified is the error of a blob of h that does not verify.
func notVerified(h backend.Handle, e *PackEntry, err error) error {
	return fmt.Errorf("%w: %s: blob %s does not verify (%w)", ErrCorrupt, h, e.ID.Short(), err)
}

// streamGroup is how many blobs streamVerified hands to fn at a time,
// once all of them are verified.
const streamGroup = 64

// streamVerified verifies every blob of es[i:i+n], whose sealed bytes are
// in data from start (decrypted, decompressed, re-hashed), and calls fn
// with its sealed bytes. The check is most of a
// copy's work, so it runs on GOMAXPROCS goroutines, while this one calls
// fn, in order, a group at a time as soon as the group is verified. The
// error names the first blob, in order, that does not verify; fn has
// been called for every blob before it and for none after.
func streamVerified(ctx context.Context, k *crypt.TierKeys, h backend.Handle, all []PackEntry, i, n int, data []byte, start int64,
	fn func(i int, sealed, plain []byte) error) error {
	es := all[i : i+n]
	workers := min(runtime.GOMAXPROCS(0), len(es))
	errs := make([]error, len(es))
	groups := make([]sync.WaitGroup, (len(es)+streamGroup-1)/streamGroup)
	for g := range groups {
		groups[g].Add(min(streamGroup, len(es)-g*streamGroup))
	}
	var next atomic.Int64
	var stop atomic.Bool // fn failed, or ctx is done: verify nothing more
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			bp := streamPlainBufs.Get().(*[]byte)
			defer streamPlainBufs.Put(bp)
			for j := int(next.Add(1)) - 1; j < len(es); j = int(next.Add(1)) - 1 {
				if !stop.Load() {
					plain, err := pack.OpenVerified(k, es[j], sealedIn(data, start, &es[j]), *bp)
					if err == nil {
						*bp = plain[:0]
					}
					errs[j] = err
				}
				groups[j/streamGroup].Done()
			}
		})
	}
	defer wg.Wait()
	for g := range groups {
		groups[g].Wait()
		for j := g * streamGroup; j < min(len(es), (g+1)*streamGroup); j++ {
			if err := ctx.Err(); err != nil {
				stop.Store(true)
				return err
			}
			if errs[j] != nil {
				stop.Store(true)
				return &StreamError{Index: i + j, Count: 1, Verify: true, Err: notVerified(h, &es[j], errs[j])}
			}
			if err := fn(i+j, sealedIn(data, start, &es[j]), nil); err != nil {
				stop.Store(true)
				return err
			}
		}
	}
	return nil
}
