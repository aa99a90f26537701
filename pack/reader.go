package pack

import (
	"context"
	"fmt"
	"io"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// RangeLoader reads length bytes at offset of one pack.
type RangeLoader func(ctx context.Context, offset int64, length int) ([]byte, error)

// KeyRing returns the keys of a tier, or crypt.ErrTierLocked.
type KeyRing func(blob.Tier) (*crypt.TierKeys, error)

// tailGuess is how much of a pack's end ReadHeader fetches first; most
// headers fit, so one read usually suffices.
const tailGuess = 64 << 10

// ReadHeader loads and opens the header of a pack of packSize bytes.
// A pack of a tier the key ring lacks returns its trailer and an error
// wrapping crypt.ErrTierLocked.
func ReadHeader(ctx context.Context, packSize int64, load RangeLoader, keys KeyRing) (Trailer, []Entry, error) {
	if packSize < TrailerSize || packSize > MaxPackSize {
		return Trailer{}, nil, fmt.Errorf("%w: pack size %d", ErrFormat, packSize)
	}
	n := min(packSize, tailGuess)
	tail, err := load(ctx, packSize-n, int(n))
	if err != nil {
		return Trailer{}, nil, err
	}
	if int64(len(tail)) != n { // a loader breaking its contract must not make us slice out of range
		return Trailer{}, nil, fmt.Errorf("pack tail: loaded %d of %d bytes: %w", len(tail), n, io.ErrUnexpectedEOF)
	}
	tr, err := DecodeTrailer(tail[len(tail)-TrailerSize:], packSize)
	if err != nil {
		return Trailer{}, nil, err
	}
	need := int64(tr.HeaderLen) + TrailerSize
	if need > int64(len(tail)) {
		if tail, err = load(ctx, packSize-need, int(need)); err != nil {
			return tr, nil, err
		}
		if int64(len(tail)) != need {
			return tr, nil, fmt.Errorf("pack header: loaded %d of %d bytes: %w", len(tail), need, io.ErrUnexpectedEOF)
		}
	}
	sealed := tail[int64(len(tail))-need : int64(len(tail))-TrailerSize]
	entries, err := OpenHeader(keys, tr, sealed, packSize-need)
	return tr, entries, err
}

// OpenHeader decrypts and parses a sealed header; blobEnd is the end of the
// blob region (pack size minus header and trailer).
func OpenHeader(keys KeyRing, tr Trailer, sealed []byte, blobEnd int64) ([]Entry, error) {
	k, err := keys(tr.Tier)
	if err != nil {
		return nil, err
	}
	plain, err := k.Open(nil, sealed, headerAAD(tr.Tier))
	if err != nil {
		return nil, fmt.Errorf("pack header: %w", err)
	}
	return ParseHeader(plain, blobEnd)
}

// Verify checks a whole pack: its bytes hash to id, its header opens, and
// every blob opens, decompresses and hashes to its id. It returns the
// trailer and entries when all is well.
func Verify(data []byte, id blob.ID, keys KeyRing) (Trailer, []Entry, error) {
	if got := blob.ID(blake3.Sum256(data)); got != id {
		return Trailer{}, nil, fmt.Errorf("%w: content hashes to %s, not its name", ErrFormat, got.Short())
	}
	size := int64(len(data))
	if size < TrailerSize {
		return Trailer{}, nil, fmt.Errorf("%w: %d bytes", ErrFormat, size)
	}
	tr, err := DecodeTrailer(data[size-TrailerSize:], size)
	if err != nil {
		return tr, nil, err
	}
	blobEnd := size - TrailerSize - int64(tr.HeaderLen)
	entries, err := OpenHeader(keys, tr, data[blobEnd:size-TrailerSize], blobEnd)
	if err != nil {
		return tr, nil, err
	}
	k, _ := keys(tr.Tier)
	var buf []byte
	for _, e := range entries {
		plain, err := OpenVerified(k, e, data[e.Offset:e.Offset+e.Length], buf)
		if err != nil {
			return tr, entries, err
		}
		buf = plain[:0]
	}
	return tr, entries, nil
}
