package pack

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/internal/busywriter"
	"lifeboat/internal/seedtest"
)

// scribblePool takes pooled buffers of every small class, fills them
// with garbage and gives them back until Halt, so that any code still
// holding a buffer it gave back sees its bytes change.
func scribblePool(t testing.TB) *busywriter.Writer {
	return busywriter.Start(t, func(i int) error {
		n := 1 << (minClass + i%9) // 512 B to 128 KiB
		b := getBuf(n)[:n]
		for j := range b {
			b[j] = byte(i)
		}
		putBuf(b)
		if i%64 == 0 {
			runtime.Gosched()
		}
		return nil
	})
}

// smallPlain returns a blob of a random small size and kind: text or
// zeros (compressed) or random bytes (stored raw), around the 256-byte and
// 1 KiB thresholds and the pool's classes.
func smallPlain(r *rand.Rand) []byte {
	var n int
	switch r.IntN(4) {
	case 0:
		n = r.IntN(fastRawBelow * 2)
	case 1:
		n = fastRawBelow + r.IntN(2*fastLiteralsBelow)
	case 2:
		n = r.IntN(16 << 10)
	default:
		n = r.IntN(80 << 10)
	}
	switch r.IntN(3) {
	case 0:
		return textBytes(r, n)
	case 1:
		return make([]byte, n)
	}
	return seedtest.Bytes(r, n)
}

// TestSealedBlobsSurviveBufferReuse seals many small blobs on
// several goroutines while a scribbler recycles pooled buffers with
// garbage. Each goroutine keeps its last sealed blobs, opens them again
// (into pooled buffers, as a reader reusing them would) only after later
// seals and opens reused the buffers, and releases them then. A sealed
// blob whose bytes shared a buffer that went back to the pool would no
// longer open to its input. Run with -race.
func TestSealedBlobsSurviveBufferReuse(t *testing.T) {
	t.Parallel()
	seed := seedtest.Rand(t).Uint64()
	levels := []Compression{CompressFastest, CompressFastest, CompressDefault, CompressBetter, CompressOff}
	for range 2 {
		defer scribblePool(t).Halt()
	}

	const keep, perWorker = 24, 600
	workers := max(4, runtime.GOMAXPROCS(0))
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			type kept struct {
				sb    SealedBlob
				plain []byte
			}
			var ring []kept
			check := func(k kept) error {
				dst := getBuf(int(k.sb.PlainLen) + decodeSlack)
				got, err := OpenVerified(wsKeys, entryOf(k.sb), k.sb.Data, dst)
				if err == nil && !bytes.Equal(got, k.plain) {
					err = fmt.Errorf("opens to different bytes")
				}
				if err != nil {
					return fmt.Errorf("worker %d: blob of %d bytes (flags %d), opened later: %w", w, len(k.plain), k.sb.Flags, err)
				}
				putBuf(got)
				return nil
			}
			defer func() {
				for _, k := range ring {
					k.sb.Release()
				}
			}()
			for i := range perWorker {
				plain := smallPlain(r)
				c := levels[r.IntN(len(levels))]
				sb, err := SealBlob(wsKeys, blob.Data, wsKeys.BlobID(plain), plain, c)
				if err != nil {
					errs <- fmt.Errorf("worker %d, blob %d (%d bytes, %s): %w", w, i, len(plain), c, err)
					return
				}
				ring = append(ring, kept{sb, plain})
				if err := check(ring[r.IntN(len(ring))]); err != nil {
					errs <- err
					return
				}
				if len(ring) > keep {
					if err := check(ring[0]); err != nil {
						errs <- err
						return
					}
					ring[0].sb.Release()
					ring = ring[1:]
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPackAfterRelease builds packs, in memory and streamed, the
// way the repository does: every sealed blob is released right after Add
// while other blobs are sealed and the scribbler reuses the buffers; the
// finished pack verifies and every blob opens to its input.
func TestPackAfterRelease(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	defer scribblePool(t).Halt()

	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed=%v", streamed), func(t *testing.T) {
			var out bytes.Buffer
			w := NewWriter(wsKeys, 4<<20)
			if streamed {
				w = NewStreamWriter(wsKeys, 4<<20, &out)
			}
			plains := map[blob.ID][]byte{}
			for i := 0; i < 2000; i++ {
				plain := smallPlain(r)
				if i%50 == 0 { // a few larger than the stream's write buffer
					plain = seedtest.Bytes(r, streamBuffer+r.IntN(streamBuffer))
				}
				sb := sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)
				if !w.Fits(len(sb.Data)) {
					sb.Release()
					break
				}
				if _, dup := plains[sb.ID]; dup {
					sb.Release()
					continue
				}
				plains[sb.ID] = plain
				if err := w.Add(sb); err != nil {
					t.Fatal(err)
				}
				sb.Release()
			}
			data, size, id, entries, err := w.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if streamed {
				data = out.Bytes()
			}
			if size != int64(len(data)) || id != blob.ID(blake3.Sum256(data)) {
				t.Fatalf("pack of %d bytes, size %d, id %s", len(data), size, id.Short())
			}
			if _, _, err := Verify(data, id, ring(wsKeys)); err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(plains) {
				t.Fatalf("%d entries for %d blobs", len(entries), len(plains))
			}
			for _, e := range entries {
				got, err := OpenVerified(wsKeys, e, data[e.Offset:e.Offset+e.Length], nil)
				if err != nil || !bytes.Equal(got, plains[e.ID]) {
					t.Fatalf("blob %s: %v", e.ID.Short(), err)
				}
			}
			if !streamed {
				ReleasePack(data)
			}
			t.Logf("%d blobs in a %d-byte pack", len(entries), size)
		})
	}
}
