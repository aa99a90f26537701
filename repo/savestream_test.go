package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/busywriter"
	"lifeboat/pack"
)

var errPlannedWrite = errors.New("planned temp write failure")

// failSizeBackend is a temp-file backend whose pack temp files fail the
// write of exactly size bytes: a sealed chunk of at least the stream
// buffer goes to the file in one write of its own, so one chosen chunk of
// a stream fails to save.
type failSizeBackend struct {
	fault.TempBackend
	size atomic.Int64
	hits atomic.Int64
}

func (b *failSizeBackend) CreateTemp() (backend.TempFile, error) {
	f, err := b.TempBackend.CreateTemp()
	if err != nil {
		return nil, err
	}
	return failSizeFile{f, b}, nil
}

type failSizeFile struct {
	backend.TempFile
	b *failSizeBackend
}

func (f failSizeFile) Write(p []byte) (int, error) {
	if int64(len(p)) == f.b.size.Load() {
		f.b.hits.Add(1)
		return 0, errPlannedWrite
	}
	return f.TempFile.Write(p)
}

// seededStream returns seeded random bytes that r's workspace chunker
// cuts into at least four chunks, the last at least 300 KiB (so its
// sealed bytes are written to a pack file in one write), of distinct
// sizes; and those sizes. A stream that falls short grows by 100 KiB a
// few times (the last chunk grows), then another stream is drawn (an
// early pair of equal sizes stays). Each chunk must hold its bytes of the
// stream until the end: a pooled buffer handed out twice would show.
func seededStream(t *testing.T, r *Repository, seed uint64) ([]byte, []int) {
	t.Helper()
	t.Logf("stream: seed %d", seed)
	var sizes []int
	for draw := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 9+draw))
		more := func(data []byte, n int) []byte {
			for range n {
				data = append(data, byte(rng.Uint32()))
			}
			return data
		}
		data := more(nil, 3<<20)
		for range 10 {
			chunks := cutStream(t, r, data)
			sizes = sizes[:0]
			for _, ch := range chunks {
				sizes = append(sizes, len(ch))
			}
			if len(sizes) >= 4 && sizes[len(sizes)-1] >= 300<<10 && distinct(sizes) {
				if got := bytes.Join(chunks, nil); !bytes.Equal(got, data) {
					t.Fatal("the chunks of the stream changed after they were cut: a pooled buffer is in use twice")
				}
				return data, sizes
			}
			data = more(data, 100<<10)
		}
	}
	t.Fatalf("no stream of the wanted shape; the last one cut into %v", sizes)
	return nil, nil
}

// cutStream cuts data with r's workspace chunker, checking that each
// chunk is data's next bytes as it is cut, and returns the chunks.
func cutStream(t *testing.T, r *Repository, data []byte) [][]byte {
	t.Helper()
	c, err := r.chunker(blob.Workspace)
	must(t, err)
	defer r.putChunker(blob.Workspace, c)
	c.Reset(bytes.NewReader(data))
	var chunks [][]byte
	off := 0
	for {
		ch, err := c.Next(nil)
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		if !bytes.Equal(ch, data[off:off+len(ch)]) {
			t.Fatalf("chunk %d (%d bytes at offset %d) is not the stream's bytes", len(chunks), len(ch), off)
		}
		off += len(ch)
		chunks = append(chunks, ch)
	}
	if off != len(data) {
		t.Fatalf("the chunks hold %d of the stream's %d bytes", off, len(data))
	}
	return chunks
}

// distinct reports whether no two of sizes are equal.
func distinct(sizes []int) bool {
	seen := make(map[int]bool, len(sizes))
	for _, n := range sizes {
		if seen[n] {
			return false
		}
		seen[n] = true
	}
	return true
}

// scribblePool fills pooled buffers of the chunk sizes with garbage
// until Halt, so a chunk buffer used after it went back to the pool
// shows as different data.
func scribblePool(t testing.TB) *busywriter.Writer {
	return busywriter.Start(t, func(i int) error {
		n := 1 << (19 + i%4) // 512 KiB to 4 MiB
		b := pack.GetBuffer(n)[:n]
		for j := 0; j < n; j += 512 {
			b[j] = byte(i)
		}
		pack.PutBuffer(b)
		runtime.Gosched()
		return nil
	})
}

// sealCounts counts how SaveStream sealed a stream's chunks: in the
// caller's goroutine as soon as each was cut (inline), or held and sealed
// beside the chunking (the last chunk sealed at the end is not counted).
// With busy, the stream sees procs-1 other streams under way, so exactly
// GOMAXPROCS, as when a capture's readers keep the cores busy.
type sealCounts struct{ inline, beside atomic.Int64 }

func countSeals(r *Repository, procs int, busy bool) (s *sealCounts, done func()) {
	s = &sealCounts{}
	r.testStreamSeal = func(inline bool) {
		if inline {
			s.inline.Add(1)
		} else {
			s.beside.Add(1)
		}
	}
	if !busy {
		return s, func() {}
	}
	r.streams.Add(int64(procs - 1))
	return s, func() { r.streams.Add(-int64(procs - 1)) }
}

// check fails t unless the chunks were sealed inline when the stream was
// busy or had one core, and beside the chunking otherwise.
func (s *sealCounts) check(t *testing.T, procs int, busy bool) {
	t.Helper()
	in, beside := s.inline.Load(), s.beside.Load()
	if wantInline := busy || procs == 1; wantInline && (in == 0 || beside != 0) || !wantInline && (beside == 0 || in != 0) {
		t.Errorf("GOMAXPROCS %d, busy %v: %d chunks sealed inline and %d beside the chunking", procs, busy, in, beside)
	}
}

// SaveStream with GOMAXPROCS 1, 2 and 3 on a multi-chunk stream, alone or
// among as many streams as cores, while the chunk buffers are recycled
// with garbage: the ids come back in order, the stats add up, and the
// stream reads back identical.
func TestSaveStreamProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer scribblePool(t).Halt()
	for _, procs := range []int{1, 2, 3} {
		for _, busy := range []bool{false, true} {
			t.Run(fmt.Sprintf("GOMAXPROCS=%d/busy=%v", procs, busy), func(t *testing.T) {
				runtime.GOMAXPROCS(procs)
				_, r := openNewTestRepo(t)
				data, sizes := seededStream(t, r, uint64(procs))
				seals, done := countSeals(r, procs, busy)
				ids, st, err := r.SaveStream(context.Background(), blob.Workspace, bytes.NewReader(data))
				done()
				must(t, err)
				seals.check(t, procs, busy)
				if len(ids) != len(sizes) || st.Chunks != len(sizes) || st.New != len(sizes) ||
					st.Bytes != int64(len(data)) || st.NewBytes != int64(len(data)) {
					t.Fatalf("%d chunks of %d bytes: %d ids, stats %+v", len(sizes), len(data), len(ids), st)
				}
				k, err := r.TierKeys(blob.Workspace)
				must(t, err)
				off := 0
				for i, n := range sizes {
					if want := k.BlobID(data[off : off+n]); ids[i] != want {
						t.Fatalf("id %d is %s, want %s", i, ids[i].Short(), want.Short())
					}
					off += n
				}
				wantStream(t, r, ids, data, "stream")
			})
		}
	}
}

// firstReadBarrier is a reader whose first Read waits until every reader
// of its group has made its first Read.
type firstReadBarrier struct {
	io.Reader
	group *sync.WaitGroup
	once  sync.Once
}

func (b *firstReadBarrier) Read(p []byte) (int, error) {
	b.once.Do(func() { b.group.Done(); b.group.Wait() })
	return b.Reader.Read(p)
}

// Four streams saved at once on two cores, each held at its first read
// until all four are under way: chunks are sealed inline (at least the
// first cut anywhere, when all four are under way); every stream's ids
// are its own, in order, and each reads back identical.
func TestSaveStreamsAtOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	const streams = 4
	_, r := openNewTestRepo(t)
	seals, _ := countSeals(r, 2, false)
	var group sync.WaitGroup
	group.Add(streams)
	type result struct {
		data []byte
		ids  []blob.ID
		err  error
	}
	results := make([]result, streams)
	datas := make([][]byte, streams)
	for i := range datas {
		datas[i], _ = seededStream(t, r, uint64(100+i))
	}
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			ids, _, err := r.SaveStream(context.Background(), blob.Workspace, &firstReadBarrier{Reader: bytes.NewReader(datas[i]), group: &group})
			results[i] = result{datas[i], ids, err}
		})
	}
	wg.Wait()
	for i, res := range results {
		must(t, res.err)
		wantStream(t, r, res.ids, res.data, fmt.Sprintf("stream %d", i))
	}
	if seals.inline.Load() == 0 {
		t.Errorf("%d streams at once on 2 cores sealed no chunk inline (%d beside)", streams, seals.beside.Load())
	}
}

// SaveBlob fails on the first, a middle or the last chunk of a stream
// (the last is sealed in the caller's goroutine), at GOMAXPROCS 1, 2 and
// 4, the stream alone or among as many streams as cores: SaveStream
// returns that error and no ids, and does not hang.
func TestSaveStreamChunkFails(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4} {
		for _, which := range []string{"first", "middle", "last"} {
			for _, busy := range []bool{false, true} {
				t.Run(fmt.Sprintf("GOMAXPROCS=%d/%s/busy=%v", procs, which, busy), func(t *testing.T) {
					runtime.GOMAXPROCS(procs)
					tr := newTestRepo(t)
					fb := &failSizeBackend{TempBackend: tr.be.(*local.Backend)}
					r, err := Open(context.Background(), fb, testPassword, Options{CacheDir: tr.cache, PackSize: 256 << 10, Packers: 1})
					must(t, err)
					defer func() { _ = r.Close(context.Background()) }()
					data, sizes := seededStream(t, r, 7)
					target := map[string]int{"first": 0, "middle": len(sizes) / 2, "last": len(sizes) - 1}[which]
					fb.size.Store(int64(sizes[target] + crypt.Overhead)) // random data is stored raw
					seals, done := countSeals(r, procs, busy)
					ids, _, err := r.SaveStream(context.Background(), blob.Workspace, bytes.NewReader(data))
					done()
					if !errors.Is(err, errPlannedWrite) || ids != nil {
						t.Fatalf("chunk %d of %d fails: SaveStream = %d ids, %v; want no ids and the write error", target, len(sizes), len(ids), err)
					}
					if fb.hits.Load() != 1 {
						t.Fatalf("the planned failure fired %d times", fb.hits.Load())
					}
					seals.check(t, procs, busy)
				})
			}
		}
	}
}

// The context is cancelled while an early chunk's save is held up (its
// pack hand-off waits in a hook) at GOMAXPROCS 1 and 2, the stream alone
// or among as many streams as cores: SaveStream
// returns context.Canceled once that save ends, and the repository is
// not damaged: the same stream saves and reads back afterwards.
func TestSaveStreamCancelledWhileSaving(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		for _, busy := range []bool{false, true} {
			t.Run(fmt.Sprintf("GOMAXPROCS=%d/busy=%v", procs, busy), func(t *testing.T) {
				runtime.GOMAXPROCS(procs)
				tr := newTestRepo(t)
				r, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: tr.cache, PackSize: 256 << 10, Packers: 1})
				must(t, err)
				defer func() { _ = r.Close(context.Background()) }()
				data, _ := seededStream(t, r, 3)
				held, release := make(chan struct{}), make(chan struct{})
				var first atomic.Bool
				r.testBeforeUpload = func() { // the second chunk's save hands the first's pack off
					if first.CompareAndSwap(false, true) {
						close(held)
						<-release
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				type result struct {
					ids []blob.ID
					err error
				}
				seals, busyDone := countSeals(r, procs, busy)
				done := make(chan result, 1)
				go func() {
					ids, _, err := r.SaveStream(ctx, blob.Workspace, bytes.NewReader(data))
					done <- result{ids, err}
				}()
				<-held
				cancel()
				close(release)
				res := <-done
				busyDone()
				seals.check(t, procs, busy)
				r.testStreamSeal = nil
				if !errors.Is(res.err, context.Canceled) || res.ids != nil {
					t.Fatalf("cancelled stream: %d ids, %v; want no ids and context.Canceled", len(res.ids), res.err)
				}
				r.testBeforeUpload = nil
				ids, _, err := r.SaveStream(context.Background(), blob.Workspace, bytes.NewReader(data))
				must(t, err)
				wantStream(t, r, ids, data, "stream saved after the cancelled one")
				checkRepo(t, r)
			})
		}
	}
}
