package pack

import (
	"bytes"
	"os/exec"
	"testing"

	"lifeboat/blob"
)

// TestSmallBlobRules pins how small blobs are stored: at the fastest
// setting, raw below 256 bytes and compressed (matches only) from there;
// at the other levels from 64 bytes. Every size around the thresholds
// round-trips.
func TestSmallBlobRules(t *testing.T) {
	r := newRand(t)
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

// TestSmallFramesDecodeWithReferenceZstd decodes the frames of small
// blobs (literals left raw) with the reference zstd tool, which the
// format promises any reader can use. It runs where zstd is installed.
func TestSmallFramesDecodeWithReferenceZstd(t *testing.T) {
	zstdPath, err := exec.LookPath("zstd")
	if err != nil {
		t.Skip("the zstd tool is not installed")
	}
	r := newRand(t)
	for _, n := range []int{fastRawBelow, 700, fastLiteralsBelow - 1, fastLiteralsBelow, 5000} {
		plain := textBytes(r, n)
		sb := sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)
		if sb.Flags != FlagZstd {
			t.Fatalf("%d bytes of text stored raw", n)
		}
		frame, err := wsKeys.Open(nil, sb.Data, blobAAD(wsKeys.Tier, sb.Type, sb.Flags, sb.ID))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(zstdPath, "-d", "-c", "-q")
		cmd.Stdin = bytes.NewReader(frame)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("zstd -d on the frame of a %d-byte blob: %v", n, err)
		}
		if !bytes.Equal(out, plain) {
			t.Fatalf("zstd -d on the frame of a %d-byte blob gave %d different bytes", n, len(out))
		}
	}
}
