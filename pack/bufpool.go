package pack

import "sync"

// bufs recycles the large scratch buffers of the save and load paths
// (compressed payloads, sealed blobs, verification output, whole packs),
// which would otherwise be allocated and zeroed for every blob.
var bufs sync.Pool

// getBuf returns an empty buffer with capacity at least n.
func getBuf(n int) []byte {
	if p, ok := bufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// putBuf recycles b; the caller must not use it afterwards.
func putBuf(b []byte) {
	if cap(b) < 64<<10 {
		return
	}
	b = b[:0]
	bufs.Put(&b)
}
