package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"lifeboat/blob"
	"lifeboat/chunk"
)

// StreamStats counts what SaveStream stored.
type StreamStats struct {
	Bytes    int64 // read from the stream
	Chunks   int
	New      int   // chunks not stored before
	NewBytes int64 // plaintext bytes of the new chunks
}

var chunkBufs = sync.Pool{New: func() any { b := make([]byte, chunk.DefaultParams.Max); return &b }}

// SaveStream cuts rd into content-defined chunks with c and saves each as a
// data blob in tier t, returning the chunk ids in order. c must come from
// r.Chunker(t).
func (r *Repository) SaveStream(ctx context.Context, t blob.Tier, c *chunk.Chunker, rd io.Reader) ([]blob.ID, StreamStats, error) {
	var st StreamStats
	var ids []blob.ID
	bp := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(bp)
	if len(*bp) < c.BufSize() {
		*bp = make([]byte, c.BufSize())
	}
	c.Reset(rd)
	for {
		data, err := c.Next(*bp)
		if errors.Is(err, io.EOF) {
			return ids, st, nil
		}
		if err != nil {
			return ids, st, err
		}
		id, known, err := r.SaveBlob(ctx, t, blob.Data, data)
		if err != nil {
			return ids, st, err
		}
		ids = append(ids, id)
		st.Bytes += int64(len(data))
		st.Chunks++
		if !known {
			st.New++
			st.NewBytes += int64(len(data))
		}
	}
}

// LoadStream writes the data blobs ids of tier t to w, in order.
func (r *Repository) LoadStream(ctx context.Context, t blob.Tier, ids []blob.ID, w io.Writer) (int64, error) {
	var n int64
	var buf []byte
	for _, id := range ids {
		data, err := r.LoadBlob(ctx, t, blob.Data, id, buf)
		if err != nil {
			return n, err
		}
		m, err := w.Write(data)
		n += int64(m)
		if err != nil {
			return n, fmt.Errorf("writing blob %s: %w", id.Short(), err)
		}
		buf = data[:0]
	}
	return n, nil
}
