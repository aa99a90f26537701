package pack

import (
	"bufio"
	"crypto/rand"
	"io"
	mrand "math/rand/v2"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// Writer builds a pack of one tier from sealed blobs, either in memory
// (NewWriter) or streamed to a file (NewStreamWriter), hashing the bytes
// as they go for the pack's id. It is not safe for concurrent use.
type Writer struct {
	keys    *crypt.TierKeys
	limit   int
	out     io.Writer
	buf     *bufio.Writer // out, for a streamed pack
	mem     *memSink      // out, for a pack built in memory
	hash    *blake3.Hasher
	n       int // bytes written
	entries []Entry
	err     error // first write error; the pack is lost
}

// NewWriter starts an empty pack in memory for the tier of k whose
// finished size, padding and header included, should stay within limit
// bytes.
func NewWriter(k *crypt.TierKeys, limit int) *Writer {
	m := &memSink{b: getBuf(limit)}
	w := newWriter(k, limit, m)
	w.mem = m
	return w
}

// NewStreamWriter is NewWriter for a pack whose bytes go to out as blobs
// are added, so the pack is never held in memory. Small blobs are gathered
// into writes of streamBuffer bytes.
func NewStreamWriter(k *crypt.TierKeys, limit int, out io.Writer) *Writer {
	w := newWriter(k, limit, out)
	w.buf = bufio.NewWriterSize(out, streamBuffer)
	w.out = w.buf
	return w
}

// streamBuffer is the write size of a streamed pack: a pack of small blobs
// (a source tree, a dependency folder) takes hundreds of writes instead of
// one per blob.
const streamBuffer = 256 << 10

func newWriter(k *crypt.TierKeys, limit int, out io.Writer) *Writer {
	return &Writer{keys: k, limit: limit, out: out, hash: blake3.New()}
}

// Fits reports whether a sealed blob of n bytes can join the pack without
// the finished pack outgrowing its limit. An empty pack takes any blob.
func (w *Writer) Fits(n int) bool { return w.FitsWith(w.n, len(w.entries), n) }

// FitsWith is Fits for a pack that is to hold count blobs in bytes
// sealed bytes once the blobs promised to it are added: whether one more
// of n bytes keeps it within its limit. A pack promised no blob takes any.
func (w *Writer) FitsWith(bytes, count, n int) bool {
	return count == 0 || w.finishedSize(bytes+n, count+1) <= int64(w.limit)
}

// finishedSize is the size of a finished pack of count blobs in blobBytes.
func (w *Writer) finishedSize(blobBytes, count int) int64 {
	hdr := (4 + count*EntrySize + headerBucket - 1) / headerBucket * headerBucket
	return padme(int64(blobBytes + hdr + crypt.Overhead + TrailerSize))
}

// write sends p to the pack's output and hash; after the first error it
// does nothing.
func (w *Writer) write(p []byte) {
	if w.err != nil {
		return
	}
	n, err := w.out.Write(p)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = err
		return
	}
	_, _ = w.hash.Write(p)
	w.n += n
}

// Add appends a sealed blob. The blob must have been sealed with the
// writer's tier keys. An error writing it, or an earlier blob still
// buffered, loses the whole pack; Add and Finish then return it.
func (w *Writer) Add(sb SealedBlob) error {
	off := w.n
	w.write(sb.Data)
	if w.err != nil {
		return w.err
	}
	w.entries = append(w.entries, Entry{Type: sb.Type, Flags: sb.Flags, ID: sb.ID,
		Offset: uint32(off), Length: uint32(len(sb.Data)), PlainLen: sb.PlainLen})
	return nil
}

// Size is the number of blob bytes added so far.
func (w *Writer) Size() int { return w.n }

// Count is the number of blobs added so far.
func (w *Writer) Count() int { return len(w.entries) }

// ReleasePack recycles the buffer of a pack returned by Finish once it has
// been stored; the caller must not use data afterwards.
func ReleasePack(data []byte) { putBuf(data) }

// Finish pads the pack to its Padmé length with random bytes, appends the
// sealed header and the trailer, and returns the pack's size, id (BLAKE3
// of its bytes) and entries, and for a pack built in memory its bytes. The
// writer must not be used afterwards.
func (w *Writer) Finish() (data []byte, size int64, id blob.ID, entries []Entry, err error) {
	plainHeader := encodeHeader(w.entries)
	sealedLen := len(plainHeader) + crypt.Overhead
	unpadded := int64(w.n + sealedLen + TrailerSize)
	if pad := int(padme(unpadded) - unpadded); pad > 0 {
		var seed [32]byte
		_, _ = rand.Read(seed[:])
		rng := mrand.NewChaCha8(seed)
		chunk := make([]byte, min(pad, 64<<10))
		for pad > 0 {
			p := chunk[:min(pad, len(chunk))]
			_, _ = rng.Read(p)
			w.write(p)
			pad -= len(p)
		}
	}
	w.write(w.keys.Seal(nil, plainHeader, headerAAD(w.keys.Tier)))
	w.write(encodeTrailer(Trailer{HeaderLen: uint32(sealedLen), Tier: w.keys.Tier}))
	if w.buf != nil && w.err == nil {
		w.err = w.buf.Flush()
	}
	if w.err != nil {
		if w.mem != nil {
			putBuf(w.mem.b)
		}
		return nil, 0, blob.ID{}, nil, w.err
	}
	if w.mem != nil {
		data = w.mem.b
	}
	var sum blob.ID
	w.hash.Sum(sum[:0])
	entries, w.entries, w.mem, w.out, w.buf = w.entries, nil, nil, nil, nil
	return data, int64(w.n), sum, entries, nil
}

// memSink collects a pack in a pooled buffer.
type memSink struct{ b []byte }

func (m *memSink) Write(p []byte) (int, error) {
	m.b = append(m.b, p...)
	return len(p), nil
}
