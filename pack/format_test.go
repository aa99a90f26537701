package pack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// TestTrailerLayout pins the 16-byte trailer of pack format v1:
// header length (uint32 LE), tier, version, two zero bytes, "LBPACK01".
func TestTrailerLayout(t *testing.T) {
	t.Parallel()
	got := encodeTrailer(Trailer{HeaderLen: 0x01020304, Tier: blob.Sensitive})
	want := []byte{0x04, 0x03, 0x02, 0x01, 2, 1, 0, 0, 'L', 'B', 'P', 'A', 'C', 'K', '0', '1'}
	if !bytes.Equal(got, want) {
		t.Fatalf("trailer % x, want % x", got, want)
	}
	tr, err := DecodeTrailer(want, 0x01020304+16)
	if err != nil || tr != (Trailer{HeaderLen: 0x01020304, Tier: blob.Sensitive}) {
		t.Fatalf("DecodeTrailer = %+v, %v", tr, err)
	}
	if TrailerSize != 16 || EntrySize != 46 || Version != 1 || FlagZstd != 1 {
		t.Fatalf("format constants changed: trailer %d, entry %d, version %d, zstd flag %d", TrailerSize, EntrySize, Version, FlagZstd)
	}
}

// TestEntryAndAADLayout pins the header entry encoding and the additional
// data of blobs and headers.
func TestEntryAndAADLayout(t *testing.T) {
	t.Parallel()
	var id blob.ID
	for i := range id {
		id[i] = byte(0x80 + i)
	}
	e := Entry{Type: blob.Tree, Flags: FlagZstd, ID: id, Offset: 0x11223344, Length: 0x55667788, PlainLen: 0x0a0b0c0d}
	want := append(append([]byte{2, 1}, id[:]...), 0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55, 0x0d, 0x0c, 0x0b, 0x0a)
	got := AppendEntry(nil, e)
	if !bytes.Equal(got, want) {
		t.Fatalf("entry % x\nwant  % x", got, want)
	}
	if DecodeEntry(got) != e {
		t.Fatal("DecodeEntry does not invert AppendEntry")
	}
	if got, want := blobAAD(blob.Sensitive, blob.Data, FlagZstd, id), append([]byte{'L', 'B', 'B', 1, 2, 1, 1}, id[:]...); !bytes.Equal(got, want) {
		t.Fatalf("blob aad % x, want % x", got, want)
	}
	if got := headerAAD(blob.Workspace); !bytes.Equal(got, []byte{'L', 'B', 'H', 1, 1}) {
		t.Fatalf("header aad % x", got)
	}
	h := encodeHeader([]Entry{e, e})
	if len(h) != 4096 || binary.LittleEndian.Uint32(h) != 2 || !bytes.Equal(h[4:50], want) || !bytes.Equal(h[50:96], want) || !allZero(h[96:]) {
		t.Fatalf("encodeHeader layout wrong: % x...", h[:100])
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func TestDecodeTrailerRefuses(t *testing.T) {
	t.Parallel()
	good := encodeTrailer(Trailer{HeaderLen: 4136, Tier: blob.Workspace})
	const size = 10_000
	if _, err := DecodeTrailer(good, size); err != nil {
		t.Fatal(err)
	}
	edit := func(i int, b byte) []byte { c := bytes.Clone(good); c[i] = b; return c }
	withLen := func(n uint32) []byte {
		c := bytes.Clone(good)
		binary.LittleEndian.PutUint32(c, n)
		return c
	}
	cases := []struct {
		name string
		b    []byte
		size int64
	}{
		{"empty", nil, size},
		{"15 bytes", good[1:], size},
		{"17 bytes", append([]byte{0}, good...), size},
		{"bad magic", edit(15, '2'), size},
		{"version 0", edit(5, 0), size},
		{"version 2", edit(5, 2), size},
		{"tier 0", edit(4, 0), size},
		{"tier 3", edit(4, 3), size},
		{"reserved byte 6", edit(6, 1), size},
		{"reserved byte 7", edit(7, 1), size},
		{"header length 0", withLen(0), size},
		{"header length below overhead", withLen(crypt.Overhead - 1), size},
		{"header length max uint32", withLen(1<<32 - 1), size},
		{"header length above MaxHeaderSize", withLen(MaxHeaderSize + 1), MaxPackSize},
		{"header longer than the pack", withLen(size - TrailerSize + 1), size},
		{"pack too large", good, MaxPackSize + 1},
		{"negative pack size", good, -1},
		{"pack of trailer only", good, TrailerSize},
	}
	for _, c := range cases {
		if tr, err := DecodeTrailer(c.b, c.size); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: DecodeTrailer = %+v, %v; want ErrFormat", c.name, tr, err)
		}
	}
	// The exact fit is accepted.
	if _, err := DecodeTrailer(withLen(size-TrailerSize), size); err != nil {
		t.Errorf("header filling the pack: %v", err)
	}
	if _, err := DecodeTrailer(withLen(MaxHeaderSize), MaxPackSize); err != nil {
		t.Errorf("largest header: %v", err)
	}
}

// header builds a plaintext header by hand: count, entries, then pad zero bytes.
func header(count uint32, pad int, entries ...Entry) []byte {
	b := binary.LittleEndian.AppendUint32(nil, count)
	for _, e := range entries {
		b = AppendEntry(b, e)
	}
	return append(b, make([]byte, pad)...)
}

func TestParseHeader(t *testing.T) {
	t.Parallel()
	e1 := Entry{Type: blob.Data, ID: blob.ID{1}, Offset: 0, Length: 100, PlainLen: 60}
	e2 := Entry{Type: blob.Tree, Flags: FlagZstd, ID: blob.ID{2}, Offset: 100, Length: 50, PlainLen: 1000}
	e3 := Entry{Type: blob.Data, ID: blob.ID{3}, Offset: 200, Length: 40, PlainLen: 0}
	const blobEnd = 300
	for name, h := range map[string][]byte{
		"compact":         header(3, 0, e1, e2, e3),
		"padded":          header(3, 4096-4-3*EntrySize, e1, e2, e3),
		"unsorted":        header(3, 10, e3, e1, e2),
		"encodeHeader":    encodeHeader([]Entry{e1, e2, e3}),
		"empty":           header(0, 0),
		"empty, padded":   header(0, 4092),
		"blob at the end": header(1, 0, Entry{Type: blob.Data, ID: blob.ID{4}, Offset: blobEnd - 40, Length: 40}),
	} {
		got, err := ParseHeader(h, blobEnd)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		n := binary.LittleEndian.Uint32(h)
		if len(got) != int(n) {
			t.Errorf("%s: %d entries, want %d", name, len(got), n)
		}
		for i, e := range got {
			if e != DecodeEntry(h[4+i*EntrySize:]) {
				t.Errorf("%s: entry %d = %+v", name, i, e)
			}
		}
	}
}

func TestParseHeaderRefusesLies(t *testing.T) {
	t.Parallel()
	ok := Entry{Type: blob.Data, ID: blob.ID{1}, Offset: 0, Length: 100, PlainLen: 60}
	z := Entry{Type: blob.Tree, Flags: FlagZstd, ID: blob.ID{2}, Offset: 100, Length: 50, PlainLen: 1000}
	with := func(e Entry, edit func(*Entry)) Entry { edit(&e); return e }
	const blobEnd = 1000
	cases := map[string][]byte{
		"nil":                       nil,
		"3 bytes":                   {0, 0, 0},
		"count beyond entries":      header(3, 0, ok, z),
		"count beyond padding":      header(200, 4096-4-2*EntrySize, ok, z),
		"count 0xFFFFFFFF":          header(0xFFFFFFFF, 4092),
		"count 0xFFFFFFFF, empty":   header(0xFFFFFFFF, 0),
		"count covers padding":      header(3, EntrySize, ok, z),
		"fewer in count":            header(1, 0, ok, z),
		"unknown type":              header(1, 0, with(ok, func(e *Entry) { e.Type = 3 })),
		"type 0":                    header(1, 0, with(ok, func(e *Entry) { e.Type = 0 })),
		"unknown flag":              header(1, 0, with(z, func(e *Entry) { e.Flags = 2 })),
		"length 0":                  header(1, 0, with(ok, func(e *Entry) { e.Length, e.PlainLen = 0, 0 })),
		"length below overhead":     header(1, 0, with(z, func(e *Entry) { e.Length = crypt.Overhead - 1 })),
		"past blob end":             header(1, 0, with(ok, func(e *Entry) { e.Offset = blobEnd - 99 })),
		"offset past blob end":      header(1, 0, with(ok, func(e *Entry) { e.Offset = blobEnd })),
		"offset near 4 GiB":         header(1, 0, with(ok, func(e *Entry) { e.Offset = 0xFFFFFFF0 })),
		"length near 4 GiB":         header(1, 0, with(z, func(e *Entry) { e.Length = 0xFFFFFFF0 })),
		"uint32 wrap":               header(1, 0, with(z, func(e *Entry) { e.Offset, e.Length = 0xFFFFFF00, 0x200 })),
		"plain length too large":    header(1, 0, with(z, func(e *Entry) { e.PlainLen = MaxBlobSize + 1 })),
		"raw plain length mismatch": header(1, 0, with(ok, func(e *Entry) { e.PlainLen = 61 })),
		"raw plain length huge":     header(1, 0, with(ok, func(e *Entry) { e.PlainLen = 0xFFFFFFFF })),
		"overlap":                   header(2, 0, ok, with(z, func(e *Entry) { e.Offset = 99 })),
		"overlap, reversed":         header(2, 0, with(z, func(e *Entry) { e.Offset = 50 }), ok),
		"same offset":               header(2, 0, ok, with(z, func(e *Entry) { e.Offset = 0 })),
		"duplicate entry":           header(2, 0, ok, ok),
		"nested":                    header(3, 0, with(ok, func(e *Entry) { e.Length, e.PlainLen = 500, 460 }), with(z, func(e *Entry) { e.Offset = 300 }), with(z, func(e *Entry) { e.Offset = 200 })),
		"non-zero padding":          append(header(2, 100, ok, z), 1),
		"non-zero padding byte 0":   append(header(2, 0, ok, z), 1, 0, 0),
	}
	for name, h := range cases {
		if got, err := ParseHeader(h, blobEnd); !errors.Is(err, ErrFormat) || got != nil {
			t.Errorf("%s: ParseHeader = %d entries, %v; want ErrFormat", name, len(got), err)
		}
	}
	// Adjacent blobs are fine; any blob past a lower blobEnd is not.
	if _, err := ParseHeader(header(2, 0, ok, z), 150); err != nil {
		t.Errorf("adjacent blobs ending at blobEnd: %v", err)
	}
	for _, end := range []int64{149, 0, -1} {
		if _, err := ParseHeader(header(2, 0, ok, z), end); !errors.Is(err, ErrFormat) {
			t.Errorf("blobEnd %d: %v", end, err)
		}
	}
}

// TestParseHeaderCountDoesNotAllocate: a header claiming 2^32-1 entries
// must be refused before anything sized by the count is allocated.
func TestParseHeaderCountDoesNotAllocate(t *testing.T) {
	h := header(0xFFFFFFFF, 64<<10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := ParseHeader(h, MaxPackSize); !errors.Is(err, ErrFormat) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("100 lying headers allocated %d bytes", d)
	}
	// The largest count that fits is bounded by the header's own size.
	maxCount := (len(h) - 4) / EntrySize
	h2 := header(uint32(maxCount), 0)
	h2 = append(h2, make([]byte, maxCount*EntrySize)...)
	if _, err := ParseHeader(h2, MaxPackSize); !errors.Is(err, ErrFormat) {
		t.Fatalf("zero entries: %v", err)
	}
}

func TestEntryCheck(t *testing.T) {
	t.Parallel()
	raw := Entry{Type: blob.Data, Offset: 10, Length: 100, PlainLen: 60}
	if err := raw.Check(110); err != nil {
		t.Fatal(err)
	}
	if err := raw.Check(109); err == nil {
		t.Fatal("entry past blobEnd passed Check")
	}
	z := Entry{Type: blob.Tree, Flags: FlagZstd, Length: crypt.Overhead, PlainLen: MaxBlobSize}
	if err := z.Check(crypt.Overhead); err != nil {
		t.Fatalf("compressed entry at the limits: %v", err)
	}
}
