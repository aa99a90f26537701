package pack

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// Compression chooses the zstd level for new blobs. klauspost's
// SpeedBestCompression is deliberately absent: it has produced corrupt
// output in other tools.
type Compression string

// Compression settings.
const (
	CompressOff     Compression = "off"
	CompressFastest Compression = "fastest"
	CompressDefault Compression = "default"
	CompressBetter  Compression = "better"
)

// ParseCompression validates a setting from the command line or config.
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case CompressOff, CompressFastest, CompressDefault, CompressBetter:
		return c, nil
	}
	return "", fmt.Errorf("unknown compression %q: want off, fastest, default or better", s)
}

func (c Compression) level() zstd.EncoderLevel {
	switch c {
	case CompressDefault:
		return zstd.SpeedDefault
	case CompressBetter:
		return zstd.SpeedBetterCompression
	}
	return zstd.SpeedFastest
}

var (
	encoders   sync.Map // encoderKey -> *zstd.Encoder (EncodeAll is safe for concurrent use)
	decoder    *zstd.Decoder
	decoderErr error
	decOnce    sync.Once
)

// Small blobs at the fastest setting (the default). zstd builds entropy
// tables for every blob it compresses; for a blob of a few hundred bytes
// that costs more CPU (5-8 µs) than compressing the rest of it, and a
// workspace holds tens of thousands of them (package files, configs,
// small directories). Measured on the bench corpus, these two rules save
// about 0.5 CPU seconds of a first capture's 10.6 for 0.9% more
// repository; the other levels, chosen for size, keep the 64-byte rule.
const (
	fastRawBelow      = 256     // stored raw
	fastLiteralsBelow = 1 << 10 // literals left raw, only matches coded
)

// minCompress is the size below which blobs are stored raw under c.
func (c Compression) minCompress() int {
	if c == CompressFastest {
		return fastRawBelow
	}
	return 64
}

// encoderKey names one of the shared encoders.
type encoderKey struct {
	c         Compression
	noEntropy bool
}

// encoderFor returns the shared encoder for c, for a blob of n bytes.
// Literals are entropy-coded even in a block where no match was found
// (klauspost's SpeedFastest and SpeedDefault otherwise store such a block
// raw): machine code and other data with a skewed byte distribution but
// few repeats of six bytes or more compress by a third to a half that way.
func encoderFor(c Compression, n int) (*zstd.Encoder, error) {
	key := encoderKey{c, c == CompressFastest && n < fastLiteralsBelow}
	if e, ok := encoders.Load(key); ok {
		return e.(*zstd.Encoder), nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(c.level()), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithLowerEncoderMem(true),
		zstd.WithNoEntropyCompression(key.noEntropy), zstd.WithAllLitEntropyCompression(!key.noEntropy))
	if err != nil {
		return nil, err
	}
	actual, _ := encoders.LoadOrStore(key, e)
	return actual.(*zstd.Encoder), nil
}

func getDecoder() (*zstd.Decoder, error) {
	decOnce.Do(func() {
		decoder, decoderErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(MaxBlobSize), zstd.IgnoreChecksum(true))
	})
	return decoder, decoderErr
}

// SealedBlob is a blob ready to go into a pack.
type SealedBlob struct {
	Type     blob.Type
	ID       blob.ID
	Flags    uint8
	PlainLen uint32
	Data     []byte // nonce || ciphertext || tag
}

// Release recycles Data's buffer once the blob has been copied into a pack.
func (sb *SealedBlob) Release() {
	putBuf(sb.Data)
	sb.Data = nil
}

// SealBlob compresses plain (when that saves at least 1/32 of it), seals it
// with the tier's key, then opens and decompresses the result and compares
// it with plain before returning it: Compress, Seal and VerifySealed in
// turn.
func SealBlob(k *crypt.TierKeys, typ blob.Type, id blob.ID, plain []byte, c Compression) (SealedBlob, error) {
	if len(plain) > MaxBlobSize {
		return SealedBlob{}, fmt.Errorf("blob %s is %d bytes, above the %d-byte limit", id.Short(), len(plain), MaxBlobSize)
	}
	payload, flags, err := Compress(plain, c)
	if err != nil {
		return SealedBlob{}, err
	}
	if flags&FlagZstd != 0 {
		defer putBuf(payload)
	}
	sb := SealedBlob{Type: typ, ID: id, Flags: flags, PlainLen: uint32(len(plain)),
		Data: Seal(getBuf(len(payload)+crypt.Overhead), k, typ, id, flags, payload)}
	if err := VerifySealed(k, typ, id, flags, sb.Data, plain); err != nil {
		sb.Release()
		return SealedBlob{}, err
	}
	return sb, nil
}

// Compress is SealBlob's first step. When zstd at c saves at least 1/32 of
// plain, it returns the compressed payload, in a buffer from the pool
// (PutBuffer gives it back), and FlagZstd; otherwise plain itself and no
// flags.
func Compress(plain []byte, c Compression) ([]byte, uint8, error) {
	if c == CompressOff || len(plain) < c.minCompress() {
		return plain, 0, nil
	}
	enc, err := encoderFor(c, len(plain))
	if err != nil {
		return nil, 0, err
	}
	if !worthCompressing(enc, plain) {
		return plain, 0, nil
	}
	z := enc.EncodeAll(plain, getBuf(len(plain)))
	if len(z) > len(plain)-len(plain)/32 {
		putBuf(z)
		return plain, 0, nil
	}
	return z, FlagZstd, nil
}

// Seal is SealBlob's second step: it appends the sealed payload (nonce,
// ciphertext, tag) to dst, bound to the blob's tier, type, flags and id.
func Seal(dst []byte, k *crypt.TierKeys, typ blob.Type, id blob.ID, flags uint8, payload []byte) []byte {
	return k.Seal(dst, payload, blobAAD(k.Tier, typ, flags, id))
}

// VerifySealed is SealBlob's last step: it opens and decompresses sealed and
// checks that the result is plain, once, before the blob can reach
// storage.
func VerifySealed(k *crypt.TierKeys, typ blob.Type, id blob.ID, flags uint8, sealed, plain []byte) error {
	got, err := OpenBlob(k, Entry{Type: typ, Flags: flags, ID: id, Length: uint32(len(sealed)), PlainLen: uint32(len(plain))}, sealed, getBuf(len(plain)+decodeSlack))
	if err != nil {
		return fmt.Errorf("verifying new blob %s before upload: %w", id.Short(), err)
	}
	defer putBuf(got)
	if !bytes.Equal(got, plain) {
		return fmt.Errorf("verifying new blob %s before upload: round trip differs from input (compressor or cipher fault)", id.Short())
	}
	return nil
}

// sampleSize is the size of each of the three slices worthCompressing tries.
const sampleSize = 16 << 10

// worthCompressing guesses from samples whether a large blob compresses;
// incompressible data (model weights, archives, media) then skips a full
// zstd pass. Small blobs are always tried. The first slice is compressed
// alone: when it saves a quarter the blob is tried without the others,
// which saves two thirds of the sampling of a compressible blob. Else the
// middle and end slices are compressed too, each alone (behind 16 KiB of
// random bytes in one frame, the fast encoder strides past the matches of
// what follows), and the blob is tried when the three save 1/50 together.
// Either way the blob is stored compressed only if the whole saves 1/32
// (Compress).
func worthCompressing(enc *zstd.Encoder, plain []byte) bool {
	if len(plain) < 16*sampleSize {
		return true
	}
	mid := len(plain)/2 - sampleSize/2
	n := 0
	for i, off := range [...]int{0, mid, len(plain) - sampleSize} {
		z := enc.EncodeAll(plain[off:off+sampleSize], getBuf(sampleSize+sampleSize/8))
		n += len(z)
		putBuf(z)
		if i == 0 && n <= sampleSize-sampleSize/4 {
			return true
		}
	}
	return n <= 3*sampleSize-3*sampleSize/50
}

// OpenVerified opens a stored blob like OpenBlob and also checks that its
// plaintext hashes to its id: the check every reader of stored blobs makes.
func OpenVerified(k *crypt.TierKeys, e Entry, sealed []byte, dst []byte) ([]byte, error) {
	plain, err := OpenBlob(k, e, sealed, dst)
	return verifyID(k, e, plain, err)
}

// OpenVerifiedInPlace is OpenVerified over a buffer the caller no longer
// needs: sealed is decrypted where it lies (openBlobInPlace).
func OpenVerifiedInPlace(k *crypt.TierKeys, e Entry, sealed []byte, dst []byte) ([]byte, error) {
	plain, err := openBlobInPlace(k, e, sealed, dst)
	return verifyID(k, e, plain, err)
}

// verifyID passes on an opened blob's plaintext, or err, and checks that
// the plaintext hashes to e's id.
func verifyID(k *crypt.TierKeys, e Entry, plain []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if k.BlobID(plain) != e.ID {
		return nil, fmt.Errorf("blob %s: %w (plaintext does not hash to its id)", e.ID.Short(), crypt.ErrAuth)
	}
	return plain, nil
}

// decodeSlack is the room zstd's decoder wants past the end of its output
// to use its fast block copies (32 bytes in klauspost/compress); without it
// every block is decoded with bounds-exact copies, about 2x slower.
const decodeSlack = 64

// OpenBlob opens a sealed blob described by e, decompresses it into dst
// (which it may reuse) and checks that the result has e's plain length.
// The caller checks the id against the plaintext where it needs to.
func OpenBlob(k *crypt.TierKeys, e Entry, sealed []byte, dst []byte) ([]byte, error) {
	return openSealed(k, e, sealed, dst, false)
}

// openBlobInPlace is OpenBlob that decrypts over sealed, which the caller
// gives up: an uncompressed blob's plaintext is returned in sealed's own
// memory (dst unused), a compressed one's is decompressed from there into
// dst. A reader of a whole run of a pack needs no buffer per blob beside
// the run's and one for plaintext.
func openBlobInPlace(k *crypt.TierKeys, e Entry, sealed []byte, dst []byte) ([]byte, error) {
	return openSealed(k, e, sealed, dst, true)
}

func openSealed(k *crypt.TierKeys, e Entry, sealed []byte, dst []byte, inPlace bool) ([]byte, error) {
	if len(sealed) != int(e.Length) {
		return nil, fmt.Errorf("blob %s: %w (%d of %d sealed bytes)", e.ID.Short(), crypt.ErrAuth, len(sealed), e.Length)
	}
	if e.PlainLen > MaxBlobSize { // e may come from an unchecked source (the local index): never allocate by it
		return nil, fmt.Errorf("blob %s: plain length %d above the %d limit", e.ID.Short(), e.PlainLen, MaxBlobSize)
	}
	aad := blobAAD(k.Tier, e.Type, e.Flags, e.ID)
	var payload []byte
	var err error
	switch {
	case inPlace:
		payload, err = k.OpenInPlace(sealed, aad)
	case e.Flags&FlagZstd == 0:
		payload, err = k.Open(dst[:0], sealed, aad)
	default:
		payload, err = k.Open(getBuf(len(sealed)), sealed, aad)
		if err == nil {
			defer putBuf(payload)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", e.ID.Short(), err)
	}
	if e.Flags&FlagZstd == 0 {
		if len(payload) != int(e.PlainLen) {
			return nil, fmt.Errorf("blob %s: %d plain bytes, index says %d", e.ID.Short(), len(payload), e.PlainLen)
		}
		return payload, nil
	}
	dec, err := getDecoder()
	if err != nil {
		return nil, err
	}
	if cap(dst) < int(e.PlainLen)+decodeSlack {
		dst = make([]byte, 0, int(e.PlainLen)+decodeSlack)
	}
	out, err := dec.DecodeAll(payload, dst[:0])
	if err != nil {
		return nil, fmt.Errorf("blob %s: decompress: %w", e.ID.Short(), err)
	}
	if len(out) != int(e.PlainLen) {
		return nil, fmt.Errorf("blob %s: decompressed to %d bytes, header says %d", e.ID.Short(), len(out), e.PlainLen)
	}
	return out, nil
}
