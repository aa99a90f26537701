package repo

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"lifeboat/blob"
)

// Windows of LoadBlobs: about loadWindow bytes of plaintext, at most
// loadWindowBlobs blobs. A window's reads read through up to loadGap
// unneeded bytes between two wanted blobs, hold at most loadMaxRead bytes
// each, and run loadReaders at a time (a window's blobs mostly lie in one
// or two packs, a request or a few each).
var loadWindow = 8 << 20 // a variable for tests

const (
	loadWindowBlobs = 4096
	loadLookups     = 256 // ids looked up at once while a window fills
	loadGap         = 256 << 10
	loadMaxRead     = 4 << 20
	loadReaders     = 4
)

// LoadBlobs calls fn with each blob (type typ, tier t) whose id next
// gives, in order: next returns a batch of ids at a time, and an empty
// batch after the last. fn gets each blob's plaintext, decrypted,
// decompressed and checked against its id, from the caller's goroutine,
// and must not keep it. next is called from another goroutine, a call at
// a time, with a context that ends when LoadBlobs returns; it must not
// wait for fn (a window is handed to fn once full or once next has no
// more). Its error is returned after fn has had every blob before it.
//
// The blobs are read a window at a time (about 8 MiB of plaintext, at
// least one blob), the next window while fn takes the one before, so at
// most two windows are held. A window's blobs are looked up together and
// each pack's are read in as few requests as the gaps between them allow,
// where LoadBlob takes a request each: on S3 that was most of the time of
// copying a workspace of small files (`lifeboat export`). A blob that does
// not come that way (not indexed, in a read that failed, or one that does
// not verify) is loaded alone by LoadBlob when its turn comes, which tries
// the other places the index knows for it, so the error is the one a
// blob-by-blob load returns, after fn has had every blob before it.
func (r *Repository) LoadBlobs(ctx context.Context, t blob.Tier, typ blob.Type, next func(context.Context) ([]blob.ID, error), fn func(id blob.ID, plain []byte) error) error {
	if _, err := r.keys.Tier(t); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	windows := make(chan *loadWin) // unbuffered: one window read ahead
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(windows)
		l := &blobLoader{r: r, t: t, typ: typ, next: next}
		for rctx.Err() == nil {
			w := l.window(rctx)
			if w == nil {
				return
			}
			select {
			case windows <- w:
			case <-rctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range windows { // let a window being sent go
		}
		wg.Wait()
	}()
	var buf []byte
	for w := range windows {
		for j, id := range w.ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			plain := w.plain[j]
			if plain == nil {
				p, err := r.LoadBlob(ctx, t, typ, id, buf)
				if err != nil {
					return err
				}
				plain, buf = p, p[:0]
			}
			if err := fn(id, plain); err != nil {
				return err
			}
		}
		if w.err != nil {
			return w.err
		}
	}
	return ctx.Err()
}

// BlobsOf is a LoadBlobs next that gives ids, then nothing.
func BlobsOf(ids []blob.ID) func(context.Context) ([]blob.ID, error) {
	return func(context.Context) ([]blob.ID, error) {
		b := ids
		ids = nil
		return b, nil
	}
}

// loadWin is one window of LoadBlobs: its ids, in order, and each one's
// plaintext, nil for one to load alone (a blob listed twice in a window
// shares its plaintext); or, last, next's error.
type loadWin struct {
	ids   []blob.ID
	plain [][]byte
	err   error
}

// blobLoader cuts the ids of LoadBlobs' next into windows and reads them.
type blobLoader struct {
	r     *Repository
	t     blob.Tier
	typ   blob.Type
	next  func(context.Context) ([]blob.ID, error)
	given []blob.ID // from next, not looked up yet
	done  bool      // next gave its last batch, or failed
	err   error     // next's error
	queue []loadPlace
}

// loadPlace is where a blob lies, if ok.
type loadPlace struct {
	id  blob.ID
	loc Location
	ok  bool
}

// window returns the next window, read; after the last, one with next's
// error if it failed, then nil.
func (l *blobLoader) window(ctx context.Context) *loadWin {
	var places []loadPlace
	size := 0
	for len(places) < loadWindowBlobs && (len(places) == 0 || size < loadWindow) {
		if len(l.queue) == 0 && !l.lookup(ctx) {
			break
		}
		p := l.queue[0]
		l.queue = l.queue[1:]
		if p.ok {
			size += int(p.loc.PlainLen)
		}
		places = append(places, p)
	}
	if len(places) == 0 {
		if l.err != nil {
			w := &loadWin{err: l.err}
			l.err = nil
			return w
		}
		return nil
	}
	return l.read(ctx, places)
}

// lookup looks the next ids up into the queue; false when none is left.
// An id the lookup does not place is loaded alone, which reports why.
func (l *blobLoader) lookup(ctx context.Context) bool {
	for len(l.given) == 0 && !l.done {
		l.given, l.err = l.next(ctx)
		l.done = l.err != nil || len(l.given) == 0
	}
	if len(l.given) == 0 {
		return false
	}
	batch := l.given[:min(len(l.given), loadLookups)]
	l.given = l.given[len(batch):]
	places := make([]loadPlace, len(batch))
	for k, id := range batch {
		places[k].id = id
	}
	if err := l.r.LookupBlobs(l.t, l.typ, batch, func(k int, loc Location, ok bool) error {
		places[k].loc, places[k].ok = loc, ok && loc.ID == batch[k] && loc.Type == l.typ
		return nil
	}); err != nil {
		for k := range places {
			places[k].ok = false
		}
	}
	l.queue = append(l.queue, places...)
	return true
}

// read reads the blobs of places, each distinct one once (ReadPlaces,
// loadReaders packs at a time). A read that fails or a blob that does not
// verify leaves its blobs nil.
func (l *blobLoader) read(ctx context.Context, places []loadPlace) *loadWin {
	w := &loadWin{ids: make([]blob.ID, len(places)), plain: make([][]byte, len(places))}
	first := map[blob.ID]int{} // the window's first place of each id found
	var locs []Location        // the distinct places found
	var at []int               // their indexes in places
	for j, p := range places {
		w.ids[j] = p.id
		if !p.ok {
			continue
		}
		if _, dup := first[p.id]; !dup {
			first[p.id] = j
			locs, at = append(locs, p.loc), append(at, j)
		}
	}
	l.r.ReadPlaces(ctx, l.t, locs, StreamOptions{Gap: loadGap, MaxRead: loadMaxRead}, loadReaders, func(k int, plain []byte) {
		w.plain[at[k]] = append(make([]byte, 0, len(plain)), plain...) // not nil; plain is recycled
	})
	for j, p := range places {
		if f, ok := first[p.id]; p.ok && ok && f != j {
			w.plain[j] = w.plain[f]
		}
	}
	return w
}

// ReadPlaces reads the blobs at locs (tier t, places a lookup gave), each
// pack's in as few requests as o's gaps allow (o.Copy unset), up to
// parallel packs at a time, and calls fn with each blob's index in locs
// and its plaintext, decrypted, decompressed and checked against its id.
// fn may be called from parallel goroutines at once and must not keep
// plain. A read that fails, or a blob that does not verify, is skipped
// and the stream goes on after it: fn is not called for such a blob, which
// the caller loads alone (LoadBlob) for its error or another place. It
// returns once every read is done or ctx is cancelled.
func (r *Repository) ReadPlaces(ctx context.Context, t blob.Tier, locs []Location, o StreamOptions, parallel int, fn func(i int, plain []byte)) {
	byPack := map[blob.ID][]int{}
	for i, loc := range locs {
		byPack[loc.Pack] = append(byPack[loc.Pack], i)
	}
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for pk, in := range byPack {
		slices.SortFunc(in, func(a, b int) int { return cmp.Compare(locs[a].Offset, locs[b].Offset) })
		es := make([]PackEntry, len(in))
		for k, i := range in {
			es[k] = locs[i].Entry
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for from := 0; from < len(es) && ctx.Err() == nil; {
				err := r.StreamPack(ctx, t, pk, es[from:], o, func(k int, _, plain []byte) error {
					fn(in[from+k], plain)
					return nil
				})
				var se *StreamError
				if !errors.As(err, &se) {
					return
				}
				from += se.Index + se.Count
			}
		})
	}
	wg.Wait()
}
