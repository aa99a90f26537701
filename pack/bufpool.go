package pack

import (
	"math/bits"
	"sync"
)

// Buffers of the save and load paths (compressed payloads, sealed blobs,
// verification output, whole packs) are recycled by size class, a power of
// two each, so a pack-sized buffer never ends up holding a chunk and a
// chunk-sized one is never dropped for a pack. Small ones are pooled too:
// a workspace's small files make tens of thousands of small blobs, three
// buffers each (from 64 KiB down to 512 bytes, a first capture of the
// bench corpus allocated 0.8 GB rather than 1.2 GB, and collected less).
const (
	minClass = 9  // 512 bytes: smaller buffers are not pooled
	maxClass = 31 // 2 GiB
)

var classes [maxClass + 1]sync.Pool

// getBuf returns an empty buffer with capacity at least n.
func getBuf(n int) []byte {
	c := bits.Len(uint(max(n, 1) - 1)) // smallest c with 1<<c >= n
	if c < minClass || c > maxClass {
		return make([]byte, 0, n)
	}
	if p, ok := classes[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<c)
}

// putBuf recycles b; the caller must not use it afterwards.
func putBuf(b []byte) {
	c := bits.Len(uint(cap(b))) - 1 // largest c with 1<<c <= cap(b)
	if c < minClass || c > maxClass {
		return
	}
	b = b[:0]
	classes[c].Put(&b)
}

// GetBuffer returns an empty buffer with capacity at least n from the
// size-class pools the pack code uses; PutBuffer gives it back.
func GetBuffer(n int) []byte { return getBuf(n) }

// PutBuffer recycles a buffer (from GetBuffer or grown from one by append);
// the caller must not use it afterwards.
func PutBuffer(b []byte) { putBuf(b) }
