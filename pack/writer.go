package pack

import (
	"crypto/rand"
	mrand "math/rand/v2"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// Writer collects sealed blobs of one tier into a pack in memory.
// It is not safe for concurrent use.
type Writer struct {
	keys    *crypt.TierKeys
	limit   int
	buf     []byte
	entries []Entry
}

// NewWriter starts an empty pack for the tier of k whose finished size,
// padding and header included, should stay within limit bytes.
func NewWriter(k *crypt.TierKeys, limit int) *Writer {
	return &Writer{keys: k, limit: limit, buf: getBuf(limit)}
}

// Fits reports whether a sealed blob of n bytes can join the pack without
// the finished pack outgrowing its limit. An empty pack takes any blob.
func (w *Writer) Fits(n int) bool {
	return len(w.entries) == 0 || w.finishedSize(len(w.buf)+n, len(w.entries)+1) <= int64(w.limit)
}

// finishedSize is the size of a finished pack of count blobs in blobBytes.
func (w *Writer) finishedSize(blobBytes, count int) int64 {
	hdr := (4 + count*EntrySize + headerBucket - 1) / headerBucket * headerBucket
	return padme(int64(blobBytes + hdr + crypt.Overhead + TrailerSize))
}

// Add appends a sealed blob. The blob must have been sealed with the
// writer's tier keys.
func (w *Writer) Add(sb SealedBlob) {
	w.entries = append(w.entries, Entry{Type: sb.Type, Flags: sb.Flags, ID: sb.ID,
		Offset: uint32(len(w.buf)), Length: uint32(len(sb.Data)), PlainLen: sb.PlainLen})
	w.buf = append(w.buf, sb.Data...)
}

// Size is the number of blob bytes added so far.
func (w *Writer) Size() int { return len(w.buf) }

// Count is the number of blobs added so far.
func (w *Writer) Count() int { return len(w.entries) }

// ReleasePack recycles the buffer of a pack returned by Finish once it has
// been stored; the caller must not use data afterwards.
func ReleasePack(data []byte) { putBuf(data) }

// Finish seals the header, pads the pack to its Padmé length with random
// bytes, appends the trailer and returns the pack bytes, its id (BLAKE3 of
// the bytes) and its entries. The writer must not be used afterwards.
func (w *Writer) Finish() (data []byte, id blob.ID, entries []Entry) {
	plainHeader := encodeHeader(w.entries)
	sealedLen := len(plainHeader) + crypt.Overhead
	unpadded := int64(len(w.buf) + sealedLen + TrailerSize)
	pad := int(padme(unpadded) - unpadded)

	data = w.buf
	if pad > 0 {
		var seed [32]byte
		_, _ = rand.Read(seed[:])
		n := len(data)
		data = growLen(data, n+pad)
		_, _ = mrand.NewChaCha8(seed).Read(data[n:])
	}
	data = w.keys.Seal(data, plainHeader, headerAAD(w.keys.Tier))
	data = append(data, encodeTrailer(Trailer{HeaderLen: uint32(sealedLen), Tier: w.keys.Tier})...)
	entries, w.entries, w.buf = w.entries, nil, nil
	return data, blake3.Sum256(data), entries
}

func growLen(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, n+n/8)
	copy(nb, b)
	return nb
}
