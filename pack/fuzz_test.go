package pack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sort"
	"testing"

	"lifeboat/blob"
)

// FuzzParseHeader feeds arbitrary plaintext headers and blob region ends to
// ParseHeader: it must never panic, and what it accepts must be consistent.
func FuzzParseHeader(f *testing.F) {
	e1 := Entry{Type: blob.Data, ID: blob.ID{1}, Offset: 0, Length: 100, PlainLen: 60}
	e2 := Entry{Type: blob.Tree, Flags: FlagZstd, ID: blob.ID{2}, Offset: 100, Length: 50, PlainLen: 1000}
	f.Add(header(2, 0, e1, e2), int64(150))
	f.Add(header(0xFFFFFFFF, 92), int64(1<<20))
	f.Fuzz(func(t *testing.T, b []byte, blobEnd int64) {
		entries, err := ParseHeader(b, blobEnd)
		if err != nil {
			if !errors.Is(err, ErrFormat) || entries != nil {
				t.Fatalf("ParseHeader = %d entries, %v; want nil and ErrFormat", len(entries), err)
			}
			return
		}
		if got := binary.LittleEndian.Uint32(b); int(got) != len(entries) {
			t.Fatalf("%d entries for count %d", len(entries), got)
		}
		var enc []byte
		for i, e := range entries {
			if err := e.Check(blobEnd); err != nil {
				t.Fatalf("accepted entry %d fails Check: %v", i, err)
			}
			enc = AppendEntry(enc, e)
		}
		if !bytes.Equal(enc, b[4:4+len(enc)]) {
			t.Fatal("entries do not re-encode to the header bytes")
		}
		sorted := append([]Entry(nil), entries...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Offset < sorted[j].Offset })
		for i := 1; i < len(sorted); i++ {
			if int64(sorted[i-1].Offset)+int64(sorted[i-1].Length) > int64(sorted[i].Offset) {
				t.Fatal("accepted overlapping entries")
			}
		}
	})
}

// FuzzDecodeTrailer: DecodeTrailer must never panic, and a trailer it
// accepts must re-encode to the same bytes and fit the pack.
func FuzzDecodeTrailer(f *testing.F) {
	f.Add(encodeTrailer(Trailer{HeaderLen: 4136, Tier: blob.Workspace}), int64(8192))
	f.Add(encodeTrailer(Trailer{HeaderLen: 1<<32 - 1, Tier: blob.Sensitive}), int64(MaxPackSize))
	f.Fuzz(func(t *testing.T, b []byte, packSize int64) {
		tr, err := DecodeTrailer(b, packSize)
		if err != nil {
			if !errors.Is(err, ErrFormat) || tr != (Trailer{}) {
				t.Fatalf("DecodeTrailer = %+v, %v; want a zero trailer and ErrFormat", tr, err)
			}
			return
		}
		if !bytes.Equal(encodeTrailer(tr), b) {
			t.Fatalf("trailer %+v does not re-encode to % x", tr, b)
		}
		if !tr.Tier.Valid() || int64(tr.HeaderLen)+TrailerSize > packSize || packSize > MaxPackSize || tr.HeaderLen > MaxHeaderSize {
			t.Fatalf("accepted trailer %+v for a %d-byte pack", tr, packSize)
		}
	})
}
