package repo

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"lifeboat/blob"
)

// A large stream is chunked and sealed in parallel; the ids come back in
// order, so the stream reads back identical.
func TestSaveLoadStream(t *testing.T) {
	tr := newTestRepo(t)
	r := tr.open(t, nil, testPassword)
	var data []byte
	for _, b := range randomBlobs(t, 40, 40, 1<<20) {
		data = append(data, b...)
	}
	c, err := r.Chunker(blob.Workspace)
	must(t, err)
	ids, st, err := r.SaveStream(context.Background(), blob.Workspace, c, bytes.NewReader(data))
	must(t, err)
	if st.Bytes != int64(len(data)) || st.Chunks != len(ids) || len(ids) < 10 {
		t.Fatalf("stats %+v for %d bytes in %d chunks", st, len(data), len(ids))
	}
	must(t, r.Flush(context.Background()))
	var out bytes.Buffer
	n, err := r.LoadStream(context.Background(), blob.Workspace, ids, &out)
	must(t, err)
	if n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatal("stream reads back different")
	}
	// The same stream again stores nothing new.
	_, st2, err := r.SaveStream(context.Background(), blob.Workspace, c, bytes.NewReader(data))
	must(t, err)
	if st2.New != 0 {
		t.Fatalf("resave stored %d new chunks", st2.New)
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
	tr := newTestRepo(t)
	r := tr.open(t, nil, testPassword)
	c, err := r.Chunker(blob.Workspace)
	must(t, err)
	if _, _, err := r.SaveStream(context.Background(), blob.Workspace, c, &failingReader{n: 3 << 20}); err == nil {
		t.Fatal("read error not reported")
	}
}
