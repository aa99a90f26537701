package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"

	"lifeboat/blob"
)

// A large stream is chunked and sealed in parallel; the ids come back in
// order, so the stream reads back identical.
func TestSaveStreamReadsBack(t *testing.T) {
	_, r := openNewTestRepo(t)
	// Random bytes, not randomBlobs: half of those repeat a short pattern,
	// where content-defined chunking may find no cut at all (depending on
	// the repository's random polynomial), so the chunk count was left to
	// chance. 24 MiB of random bytes make about 30 chunks.
	const seed = 40
	t.Logf("stream: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	data := make([]byte, 24<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	ids, st, err := r.SaveStream(context.Background(), blob.Workspace, bytes.NewReader(data))
	must(t, err)
	if st.Bytes != int64(len(data)) || st.Chunks != len(ids) || len(ids) < 10 {
		t.Fatalf("stats %+v for %d bytes in %d chunks", st, len(data), len(ids))
	}
	wantStream(t, r, ids, data, "stream")
	// The same stream again stores nothing new.
	_, st2, err := r.SaveStream(context.Background(), blob.Workspace, bytes.NewReader(data))
	must(t, err)
	if st2.New != 0 {
		t.Fatalf("resave stored %d new chunks", st2.New)
	}
}

// wantStream flushes r and checks that the workspace data blobs ids read
// back as want; what names the stream in the failure.
func wantStream(t *testing.T, r *Repository, ids []blob.ID, want []byte, what string) {
	t.Helper()
	must(t, r.Flush(context.Background()))
	var out bytes.Buffer
	must(t, r.LoadBlobs(context.Background(), blob.Workspace, blob.Data, BlobsOf(ids), func(_ blob.ID, plain []byte) error {
		out.Write(plain)
		return nil
	}))
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("%s reads back different", what)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk read error")
	}
	m := min(len(p), f.n)
	f.n -= m
	return m, nil
}

func TestSaveStreamReadError(t *testing.T) {
	_, r := openNewTestRepo(t)
	for _, n := range []int{0, 100, 3 << 20} { // in the head SaveStream reads itself, and past it
		if _, _, err := r.SaveStream(context.Background(), blob.Workspace, &failingReader{n: n}); err == nil || err.Error() != "disk read error" {
			t.Fatalf("read error after %d bytes: %v", n, err)
		}
	}
}

// Streams of no chunk and of one (sealed in the caller's goroutine), and
// a stream whose context is cancelled.
func TestSaveStreamShort(t *testing.T) {
	_, r := openNewTestRepo(t)
	ctx := context.Background()
	ids, st, err := r.SaveStream(ctx, blob.Workspace, bytes.NewReader(nil))
	must(t, err)
	if len(ids) != 0 || st.Chunks != 0 {
		t.Fatalf("empty stream: %d ids, stats %+v", len(ids), st)
	}
	small := bytes.Repeat([]byte("one chunk "), 100)
	ids, st, err = r.SaveStream(ctx, blob.Workspace, bytes.NewReader(small))
	must(t, err)
	if len(ids) != 1 || st.Chunks != 1 || st.New != 1 || st.Bytes != int64(len(small)) {
		t.Fatalf("small stream: %d ids, stats %+v", len(ids), st)
	}
	wantStream(t, r, ids, small, "small stream")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := r.SaveStream(cancelled, blob.Workspace, bytes.NewReader(bytes.Repeat([]byte("x"), 4<<20))); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled stream: %v, want context.Canceled", err)
	}
}

// SaveStream reads a stream no longer than the minimum chunk size itself,
// as one chunk: the ids must be the chunker's, for streams just below, at
// and just above the minimum, however the reader hands out its bytes.
func TestSaveStreamHeadMatchesChunker(t *testing.T) {
	_, r := openNewTestRepo(t)
	c, err := r.chunker(blob.Workspace)
	must(t, err)
	k, err := r.TierKeys(blob.Workspace)
	must(t, err)
	const seed = 41
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	data := make([]byte, 3*c.MinSize())
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	readers := map[string]func([]byte) io.Reader{
		"whole":          func(b []byte) io.Reader { return bytes.NewReader(b) },
		"one byte":       func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"data with EOF":  func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
		"half each time": func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
	}
	for _, n := range []int{1, c.MinSize() - 1, c.MinSize(), c.MinSize() + 1, 2*c.MinSize() + 7} {
		stream := data[:n]
		var want []blob.ID
		c.Reset(bytes.NewReader(stream))
		buf := make([]byte, 0, c.BufSize())
		for {
			chunk, err := c.Next(buf)
			if err == io.EOF {
				break
			}
			must(t, err)
			want = append(want, k.BlobID(chunk))
		}
		for name, rd := range readers {
			if name == "one byte" && n > c.MinSize()+1 {
				continue // slow, and the long path is the chunker's own
			}
			ids, st, err := r.SaveStream(context.Background(), blob.Workspace, rd(stream))
			must(t, err)
			if !slices.Equal(ids, want) || st.Bytes != int64(n) {
				t.Fatalf("%d bytes, %s: %d ids, want the chunker's %d (stats %+v)", n, name, len(ids), len(want), st)
			}
			wantStream(t, r, ids, stream, fmt.Sprintf("%d bytes, %s", n, name))
		}
	}
}
