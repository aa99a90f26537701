package pack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// Format constants of pack version 1.
const (
	Version       = 1
	TrailerSize   = 16
	EntrySize     = 1 + 1 + blob.IDSize + 4 + 4 + 4 // type, flags, id, offset, length, plain length
	headerBucket  = 4096                            // plaintext header is padded to a multiple of this
	MaxBlobSize   = 64 << 20                        // largest plaintext blob
	MaxHeaderSize = 64 << 20                        // largest sealed header a reader accepts
	MaxPackSize   = 2 << 30                         // largest pack a reader accepts
)

var trailerMagic = [8]byte{'L', 'B', 'P', 'A', 'C', 'K', '0', '1'}

// Flags of a blob entry.
const (
	FlagZstd   uint8 = 1 << 0 // the sealed plaintext is a zstd frame
	knownFlags       = FlagZstd
)

// ErrFormat marks a pack whose bytes do not follow the format.
var ErrFormat = errors.New("malformed pack")

// Entry describes one blob in a pack.
type Entry struct {
	Type     blob.Type
	Flags    uint8
	ID       blob.ID
	Offset   uint32 // of the sealed blob from the start of the pack
	Length   uint32 // of the sealed blob
	PlainLen uint32 // of the blob's plaintext
}

// Trailer is the plaintext end of a pack.
type Trailer struct {
	HeaderLen uint32
	Tier      blob.Tier
}

func encodeTrailer(t Trailer) []byte {
	b := make([]byte, TrailerSize)
	binary.LittleEndian.PutUint32(b[0:4], t.HeaderLen)
	b[4] = byte(t.Tier)
	b[5] = Version
	copy(b[8:], trailerMagic[:])
	return b
}

// DecodeTrailer parses the last TrailerSize bytes of a pack of size packSize.
func DecodeTrailer(b []byte, packSize int64) (Trailer, error) {
	if len(b) != TrailerSize || [8]byte(b[8:16]) != trailerMagic {
		return Trailer{}, fmt.Errorf("%w: no pack trailer (not a lifeboat pack, or truncated)", ErrFormat)
	}
	if b[5] != Version {
		return Trailer{}, fmt.Errorf("%w: pack version %d, this lifeboat reads version %d", ErrFormat, b[5], Version)
	}
	t := Trailer{HeaderLen: binary.LittleEndian.Uint32(b[0:4]), Tier: blob.Tier(b[4])}
	if !t.Tier.Valid() || b[6] != 0 || b[7] != 0 {
		return Trailer{}, fmt.Errorf("%w: bad trailer fields", ErrFormat)
	}
	if packSize > MaxPackSize || t.HeaderLen < crypt.Overhead || t.HeaderLen > MaxHeaderSize || int64(t.HeaderLen)+TrailerSize > packSize {
		return Trailer{}, fmt.Errorf("%w: header length %d does not fit a %d-byte pack", ErrFormat, t.HeaderLen, packSize)
	}
	return t, nil
}

func headerAAD(t blob.Tier) []byte { return []byte{'L', 'B', 'H', Version, byte(t)} }

func blobAAD(t blob.Tier, typ blob.Type, flags uint8, id blob.ID) []byte {
	aad := make([]byte, 0, 7+blob.IDSize)
	aad = append(aad, 'L', 'B', 'B', Version, byte(t), byte(typ), flags)
	return append(aad, id[:]...)
}

// encodeHeader returns the plaintext header: count, entries, zero padding.
func encodeHeader(entries []Entry) []byte {
	n := 4 + len(entries)*EntrySize
	n = (n + headerBucket - 1) / headerBucket * headerBucket
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, uint32(len(entries)))
	p := b[4:4]
	for _, e := range entries {
		p = AppendEntry(p, e)
	}
	return b
}

// AppendEntry appends the EntrySize-byte encoding of e to b.
func AppendEntry(b []byte, e Entry) []byte {
	b = append(b, byte(e.Type), e.Flags)
	b = append(b, e.ID[:]...)
	b = binary.LittleEndian.AppendUint32(b, e.Offset)
	b = binary.LittleEndian.AppendUint32(b, e.Length)
	return binary.LittleEndian.AppendUint32(b, e.PlainLen)
}

// DecodeEntry decodes the first EntrySize bytes of p. It does not validate.
func DecodeEntry(p []byte) Entry {
	return Entry{Type: blob.Type(p[0]), Flags: p[1], ID: blob.ID(p[2:34]),
		Offset: binary.LittleEndian.Uint32(p[34:]), Length: binary.LittleEndian.Uint32(p[38:]),
		PlainLen: binary.LittleEndian.Uint32(p[42:])}
}

// ParseHeader decodes a plaintext header. blobEnd is where the blob region
// of the pack ends (pack size minus sealed header and trailer); every entry
// must lie inside it, and no two entries may overlap.
func ParseHeader(b []byte, blobEnd int64) ([]Entry, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: header of %d bytes", ErrFormat, len(b))
	}
	count := int64(binary.LittleEndian.Uint32(b))
	if count*EntrySize > int64(len(b)-4) {
		return nil, fmt.Errorf("%w: header claims %d entries but holds at most %d", ErrFormat, count, (len(b)-4)/EntrySize)
	}
	entries := make([]Entry, count)
	p := b[4:]
	for i := range entries {
		e := DecodeEntry(p)
		if err := e.Check(blobEnd); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrFormat, i, err)
		}
		entries[i] = e
		p = p[EntrySize:]
	}
	for _, c := range p {
		if c != 0 {
			return nil, fmt.Errorf("%w: non-zero header padding", ErrFormat)
		}
	}
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Offset < sorted[j].Offset })
	for i := 1; i < len(sorted); i++ {
		if int64(sorted[i-1].Offset)+int64(sorted[i-1].Length) > int64(sorted[i].Offset) {
			return nil, fmt.Errorf("%w: blobs at offsets %d and %d overlap", ErrFormat, sorted[i-1].Offset, sorted[i].Offset)
		}
	}
	return entries, nil
}

// Check validates one entry against the blob region [0, blobEnd).
func (e Entry) Check(blobEnd int64) error {
	switch {
	case !e.Type.Valid():
		return fmt.Errorf("unknown blob type %d", e.Type)
	case e.Flags&^knownFlags != 0:
		return fmt.Errorf("unknown flags %#x", e.Flags)
	case e.Length < crypt.Overhead:
		return fmt.Errorf("sealed length %d below the %d-byte overhead", e.Length, crypt.Overhead)
	case int64(e.Offset)+int64(e.Length) > blobEnd:
		return fmt.Errorf("blob [%d, +%d) runs past the blob region end %d", e.Offset, e.Length, blobEnd)
	case e.PlainLen > MaxBlobSize:
		return fmt.Errorf("plain length %d above the %d limit", e.PlainLen, MaxBlobSize)
	case e.Flags&FlagZstd == 0 && e.PlainLen != e.Length-crypt.Overhead:
		return fmt.Errorf("uncompressed blob with plain length %d but sealed length %d", e.PlainLen, e.Length)
	}
	return nil
}
