package repo

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"lifeboat/blob"
	"lifeboat/pack"
)

// streamPack saves n seeded blobs of 200 B to 2.2 KiB, every other one
// compressible (stored compressed from 256 bytes), into
// one pack and returns its id, path and entries by offset, and the blobs
// by entry.
func streamPack(t *testing.T, seed uint64, n int) (*Repository, blob.ID, string, []PackEntry, [][]byte) {
	t.Helper()
	tr := newTestRepo(t)
	r, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: tr.cache, PackSize: 16 << 20, Packers: 1})
	must(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	t.Logf("blobs: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	plains := make([][]byte, n)
	for i := range plains {
		plains[i] = make([]byte, 200+rng.IntN(2000))
		for j := range plains[i] {
			plains[i][j] = byte(rng.Uint32())
		}
		if i%2 == 1 { // every other blob repeats itself: stored compressed
			copy(plains[i][16:], bytes.Repeat(plains[i][:16], len(plains[i])/16))
		}
	}
	ids := saveAll(t, r, blob.Workspace, plains)
	byID := map[blob.ID][]byte{}
	var pk blob.ID
	es := make([]PackEntry, n)
	for i, id := range ids {
		loc, ok, err := r.LookupBlob(blob.Workspace, blob.Data, id)
		if err != nil || !ok {
			t.Fatalf("lookup %d: %v %v", i, ok, err)
		}
		if i > 0 && loc.Pack != pk {
			t.Fatal("the blobs went to more than one pack")
		}
		pk, es[i], byID[id] = loc.Pack, loc.Entry, plains[i]
		if compressed := loc.Entry.Flags&pack.FlagZstd != 0; compressed != (i%2 == 1 && len(plains[i]) >= 256) {
			t.Fatalf("blob %d (%d bytes): compressed=%v, want every other one of 256 bytes or more", i, len(plains[i]), compressed)
		}
	}
	slices.SortFunc(es, func(a, b PackEntry) int { return cmp.Compare(a.Offset, b.Offset) })
	for i, e := range es {
		plains[i] = byID[e.ID]
	}
	return r, pk, filepath.Join(tr.dir, "data", pk.String()[:2], pk.String()), es, plains
}

// StreamPack over requests of one or several groups, on one goroutine or
// more, in one request or several: a blob that does not verify ends the
// call with a StreamError naming the first bad blob in pack order even
// when a later one is bad too; fn saw every blob before it, in order, and
// none after. A clean pack streams every blob: with Copy sealed as stored,
// else opened (and no sealed bytes).
func TestStreamPackStopsAtFirstBadBlob(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 3} {
		runtime.GOMAXPROCS(procs)
		for _, tc := range []struct {
			n   int
			bad []int
		}{
			{200, []int{150, 190}},
			{200, []int{199, 3}},
			{128, []int{64}},
			{128, []int{0}},
			{64, []int{63}},
			{1, []int{0}},
			{200, nil},
			{1, nil},
		} {
			t.Run(fmt.Sprintf("procs%d-n%d-bad%v", procs, tc.n, tc.bad), func(t *testing.T) {
				r, pk, path, es, plains := streamPack(t, uint64(tc.n*7+len(tc.bad)), tc.n)
				first := tc.n
				if len(tc.bad) > 0 {
					data, err := os.ReadFile(path)
					must(t, err)
					for _, b := range tc.bad {
						data[es[b].Offset+es[b].Length/2] ^= 0x40
						first = min(first, b)
					}
					must(t, os.WriteFile(path, data, 0o600))
				}
				for _, o := range []StreamOptions{{Copy: true}, {}, {Gap: 1 << 10, MaxRead: 16 << 10, Copy: true}, {Gap: 1 << 10, MaxRead: 16 << 10}} {
					seen := 0
					err := r.StreamPack(t.Context(), blob.Workspace, pk, es, o, func(i int, sealed, plain []byte) error {
						if i != seen || o.Copy && len(sealed) != int(es[i].Length) || !o.Copy && sealed != nil {
							t.Fatalf("%+v: blob %d (%d sealed bytes) handed over as number %d", o, i, len(sealed), seen)
						}
						if o.Copy != (plain == nil) || !o.Copy && !bytes.Equal(plain, plains[i]) {
							t.Fatalf("%+v: blob %d: wrong plaintext", o, i)
						}
						seen++
						return nil
					})
					if seen != first {
						t.Fatalf("%+v: fn saw %d blobs, want the %d before the first bad one", o, seen, first)
					}
					if first == tc.n {
						must(t, err)
						continue
					}
					var se *StreamError
					if !errors.As(err, &se) || !se.Verify || se.Index != first || se.Count != 1 || !errors.Is(err, ErrCorrupt) ||
						!strings.Contains(err.Error(), es[first].ID.Short()) {
						t.Fatalf("%+v: want a StreamError about blob %d (%s), got %#v", o, first, es[first].ID.Short(), err)
					}
				}
			})
		}
	}
}

// A request that fails names every blob it was to hold: a missing pack
// wraps ErrPackMissing, a truncated one ErrCorrupt; fn's own error comes
// back as it is, and stops the stream.
func TestStreamPackReadErrors(t *testing.T) {
	r, pk, path, es, _ := streamPack(t, 5, 40)
	stop := errors.New("enough")
	n := 0
	err := r.StreamPack(t.Context(), blob.Workspace, pk, es, StreamOptions{}, func(i int, _, _ []byte) error {
		if n++; i == 9 {
			return stop
		}
		return nil
	})
	if err != stop || n != 10 {
		t.Fatalf("fn's error: got %v after %d blobs", err, n)
	}

	fi, err := os.Stat(path)
	must(t, err)
	must(t, os.Truncate(path, int64(es[30].Offset)+1))
	o := StreamOptions{Gap: 1 << 10, MaxRead: 8 << 10}
	n = 0
	err = r.StreamPack(t.Context(), blob.Workspace, pk, es, o, func(int, []byte, []byte) error { n++; return nil })
	var se *StreamError
	if !errors.As(err, &se) || se.Verify || se.Index > 30 || se.Index+se.Count <= 30 || se.Index != n || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated pack: %d blobs streamed, then %#v", n, err)
	}
	t.Logf("truncated at blob 30 of %d bytes: %v", fi.Size(), err)

	must(t, os.Remove(path))
	err = r.StreamPack(t.Context(), blob.Workspace, pk, es, StreamOptions{}, func(int, []byte, []byte) error { return nil })
	if !errors.As(err, &se) || se.Verify || se.Index != 0 || se.Count != len(es) || !errors.Is(err, ErrPackMissing) {
		t.Fatalf("missing pack: %#v", err)
	}
}
