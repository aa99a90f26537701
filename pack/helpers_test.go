package pack

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/seedtest"
)

var words = []string{"the", "backup", "func", "return", "err", "nil", "if", "for", "package", "lifeboat",
	"snapshot", "{", "}", "(", ")", "data", "chunk", "index", "\n", "\t", "// comment", "0x1f", "import"}

// textBytes returns n bytes of compressible, source-code-like text.
func textBytes(r *rand.Rand, n int) []byte {
	var b bytes.Buffer
	b.Grow(n + 16)
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		if r.IntN(8) == 0 {
			fmt.Fprintf(&b, "%d", r.IntN(100000))
		}
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

// skewedBytes returns n bytes drawn at random from eight values, like
// machine code's frequent opcodes: three bits of entropy a byte, and few
// repeats of six bytes or more for an LZ coder to find.
func skewedBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = "\x48\x89\x8b\xe8\x0f\x00\xff\xc3"[r.IntN(8)]
	}
	return b
}

func fixedKey(b byte) crypt.Key {
	var k crypt.Key
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

// Fixed test keys, so the pinned sample pack stays openable.
var (
	wsKeys   = crypt.NewTierKeys(blob.Workspace, fixedKey(0x10), fixedKey(0x40))
	sensKeys = crypt.NewTierKeys(blob.Sensitive, fixedKey(0x70), fixedKey(0xa0))
)

// ring returns a KeyRing holding the given tier keys.
func ring(keys ...*crypt.TierKeys) KeyRing {
	return func(t blob.Tier) (*crypt.TierKeys, error) {
		for _, k := range keys {
			if k.Tier == t {
				return k, nil
			}
		}
		return nil, fmt.Errorf("%s tier: %w", t, crypt.ErrTierLocked)
	}
}

var bothTiers = ring(wsKeys, sensKeys)

func sealBlob(t testing.TB, k *crypt.TierKeys, typ blob.Type, plain []byte, c Compression) SealedBlob {
	t.Helper()
	sb, err := SealBlob(k, typ, k.BlobID(plain), plain, c)
	if err != nil {
		t.Fatalf("SealBlob(%d bytes, %s): %v", len(plain), c, err)
	}
	return sb
}

func entryOf(sb SealedBlob) Entry {
	return Entry{Type: sb.Type, Flags: sb.Flags, ID: sb.ID, Length: uint32(len(sb.Data)), PlainLen: sb.PlainLen}
}

// loader serves ranges of data and records every request, refusing any
// that falls outside the pack, as a backend would.
type loader struct {
	data  []byte
	calls [][2]int64
}

func (l *loader) load(_ context.Context, off int64, n int) ([]byte, error) {
	l.calls = append(l.calls, [2]int64{off, int64(n)})
	if off < 0 || n < 0 || off+int64(n) > int64(len(l.data)) {
		return nil, fmt.Errorf("range [%d, +%d) outside the %d-byte pack", off, n, len(l.data))
	}
	return bytes.Clone(l.data[off : off+int64(n)]), nil
}

// testPack holds a finished pack and what went into it.
type testPack struct {
	data    []byte
	id      blob.ID
	entries []Entry
	plains  map[blob.ID][]byte
	unpad   int64 // length before Padmé padding
}

// buildPack writes count blobs of random sizes up to maxSize, mixing text,
// random data, blob types and compression settings (duplicates are dropped,
// as the repository would).
func buildPack(t testing.TB, r *rand.Rand, k *crypt.TierKeys, count, maxSize int) testPack {
	t.Helper()
	levels := []Compression{CompressOff, CompressFastest, CompressDefault, CompressBetter}
	var blobs []SealedBlob
	plains := map[blob.ID][]byte{}
	for i := range count {
		n := r.IntN(maxSize + 1)
		var plain []byte
		if i%2 == 0 {
			plain = textBytes(r, n)
		} else {
			plain = seedtest.Bytes(r, n)
		}
		typ := blob.Data
		if i%3 == 0 {
			typ = blob.Tree
		}
		sb := sealBlob(t, k, typ, plain, levels[i%len(levels)])
		if _, dup := plains[sb.ID]; !dup {
			plains[sb.ID] = plain
			blobs = append(blobs, sb)
		}
	}
	return finishPack(t, k, blobs, plains)
}

// finishPack writes blobs into a pack.
func finishPack(t testing.TB, k *crypt.TierKeys, blobs []SealedBlob, plains map[blob.ID][]byte) testPack {
	t.Helper()
	w := NewWriter(k, 1<<20)
	for _, sb := range blobs {
		w.Add(sb)
	}
	if w.Count() != len(blobs) {
		t.Fatalf("Count = %d, want %d", w.Count(), len(blobs))
	}
	p := testPack{plains: plains}
	blobBytes := w.Size()
	var size int64
	var err error
	p.data, size, p.id, p.entries, err = w.Finish()
	if err != nil || size != int64(len(p.data)) || p.id != blob.ID(blake3.Sum256(p.data)) {
		t.Fatalf("Finish: %v; size %d for %d bytes; id %s", err, size, len(p.data), p.id.Short())
	}
	hdr := 4 + len(p.entries)*EntrySize
	hdr = (hdr + headerBucket - 1) / headerBucket * headerBucket
	p.unpad = int64(blobBytes + hdr + crypt.Overhead + TrailerSize)
	return p
}
