package pack

import (
	"bytes"
	"testing"

	"lifeboat/blob"
	"lifeboat/internal/seedtest"
)

// TestSmallBlobRules pins how small blobs are stored: at the fastest
// setting, raw below 256 bytes and compressed (matches only) from there;
// at the other levels from 64 bytes. Every size around the thresholds
// round-trips.
func TestSmallBlobRules(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	zeros := make([]byte, 2*fastLiteralsBelow) // compressible at every size and level
	cases := []struct {
		c          Compression
		n          int
		compressed bool
	}{
		{CompressFastest, 64, false},
		{CompressFastest, fastRawBelow - 1, false},
		{CompressFastest, fastRawBelow, true},
		{CompressFastest, fastLiteralsBelow - 1, true},
		{CompressFastest, fastLiteralsBelow, true},
		{CompressDefault, 63, false},
		{CompressDefault, 64, true},
		{CompressBetter, 200, true},
	}
	for _, c := range cases {
		sb := sealBlob(t, wsKeys, blob.Data, zeros[:c.n], c.c)
		if got := sb.Flags == FlagZstd; got != c.compressed {
			t.Errorf("%s, %d zero bytes: compressed=%v, want %v", c.c, c.n, got, c.compressed)
		}
		if got := openBlob(t, wsKeys, sb); !bytes.Equal(got, zeros[:c.n]) {
			t.Fatalf("%s, %d bytes: round trip differs", c.c, c.n)
		}
	}
	text := textBytes(r, 2*fastLiteralsBelow)
	for n := 0; n <= len(text); n += 7 {
		for _, plain := range [][]byte{text[:n], make([]byte, n)} {
			if got := openBlob(t, wsKeys, sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)); !bytes.Equal(got, plain) {
				t.Fatalf("fastest, %d bytes: round trip differs", n)
			}
		}
	}
}

// A blob whose bytes are skewed but seldom repeat (machine code) is
// compressed at the fastest setting too: by entropy coding of its
// literals, where a fast LZ pass finds nothing to match.
func TestSkewedBlobCompressesAtFastest(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for _, n := range []int{4 << 10, 64 << 10, 1 << 20} {
		plain := skewedBytes(r, n)
		payload, flags, err := Compress(plain, CompressFastest)
		if err != nil {
			t.Fatal(err)
		}
		if flags != FlagZstd || len(payload) > n/2 {
			t.Errorf("%d skewed bytes: flags %#x, %d bytes stored; want compressed to at most half", n, flags, len(payload))
		}
		if got := openBlob(t, wsKeys, sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)); !bytes.Equal(got, plain) {
			t.Fatalf("%d skewed bytes: round trip differs", n)
		}
	}
}
