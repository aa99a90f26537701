package pack

import (
	"bytes"
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
)

// A streamed pack is a valid pack: same layout, id the BLAKE3 of the bytes
// written, every blob opens.
func TestStreamWriter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := NewStreamWriter(wsKeys, 1<<20, &out)
	plains := map[blob.ID][]byte{}
	for i := range 20 {
		p := bytes.Repeat([]byte{byte(i)}, 1000*(i+1))
		sb := sealBlob(t, wsKeys, blob.Data, p, CompressFastest)
		plains[sb.ID] = p
		if err := w.Add(sb); err != nil {
			t.Fatal(err)
		}
	}
	data, size, id, entries, err := w.Finish()
	if err != nil || data != nil {
		t.Fatalf("Finish: %v, %d bytes returned for a streamed pack", err, len(data))
	}
	if size != int64(out.Len()) || id != blob.ID(blake3.Sum256(out.Bytes())) {
		t.Fatalf("size %d id %s, wrote %d bytes hashing to %s", size, id.Short(), out.Len(), blob.ID(blake3.Sum256(out.Bytes())).Short())
	}
	_, got, err := Verify(out.Bytes(), id, ring(wsKeys))
	if err != nil || !slices.Equal(got, entries) {
		t.Fatalf("Verify: %v (%d entries, want %d)", err, len(got), len(entries))
	}
	for _, e := range entries {
		plain, err := OpenVerified(wsKeys, e, out.Bytes()[e.Offset:e.Offset+e.Length], nil)
		if err != nil || !bytes.Equal(plain, plains[e.ID]) {
			t.Fatalf("blob %s: %v", e.ID.Short(), err)
		}
	}
}

// failAfter accepts n bytes, then fails like a full disk.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, syscall.ENOSPC
	}
	f.n -= len(p)
	return len(p), nil
}

// A write error loses the pack: Add (once the blob reaches the output)
// and Finish report it, and nothing claims the blob is in the pack.
func TestStreamWriterError(t *testing.T) {
	t.Parallel()
	w := NewStreamWriter(wsKeys, 1<<20, &failAfter{n: streamBuffer + 100<<10})
	sb := sealBlob(t, wsKeys, blob.Data, bytes.Repeat([]byte("a"), streamBuffer+50<<10), CompressOff)
	if err := w.Add(sb); err != nil {
		t.Fatalf("first blob fits: %v", err)
	}
	if err := w.Add(sb); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Add past the failure: %v, want ENOSPC", err)
	}
	if w.Count() != 1 {
		t.Fatalf("Count = %d after a failed Add, want 1", w.Count())
	}
	if _, _, _, _, err := w.Finish(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Finish after a write error: %v", err)
	}

	// Small blobs wait in the buffer: the failure shows at Finish.
	w = NewStreamWriter(wsKeys, 1<<20, &failAfter{n: 3000})
	sb = sealBlob(t, wsKeys, blob.Data, bytes.Repeat([]byte("a"), 2000), CompressOff)
	for range 2 {
		if err := w.Add(sb); err != nil {
			t.Fatalf("buffered Add: %v", err)
		}
	}
	if _, _, _, _, err := w.Finish(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Finish with buffered blobs past the failure: %v, want ENOSPC", err)
	}
}
