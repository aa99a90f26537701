package pack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"lifeboat/blob"
	"lifeboat/internal/seedtest"
)

// zstdKinds are contents that drive zstd's match finder differently:
// no matches, one long match, short periods, small alphabets, copies at
// many offsets (repeat offsets included), structured binary, text.
var zstdKinds = []struct {
	name string
	gen  func(r *rand.Rand, n int) []byte
}{
	{"text", textBytes},
	{"zeros", func(_ *rand.Rand, n int) []byte { return make([]byte, n) }},
	{"random", seedtest.Bytes},
	{"period", func(r *rand.Rand, n int) []byte {
		p := seedtest.Bytes(r, 1+r.IntN(40))
		return bytes.Repeat(p, n/len(p)+1)[:n]
	}},
	{"alphabet4", func(r *rand.Rand, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "acgt"[r.IntN(4)]
		}
		return b
	}},
	{"copies", func(r *rand.Rand, n int) []byte {
		b := make([]byte, 0, n)
		for len(b) < n {
			if len(b) > 8 && r.IntN(3) > 0 { // copy an earlier piece, often at the same distance again
				l := min(4+r.IntN(40), n-len(b))
				off := r.IntN(len(b))
				for i := range l {
					b = append(b, b[off+i])
				}
			} else {
				b = append(b, seedtest.Bytes(r, min(1+r.IntN(12), n-len(b)))...)
			}
		}
		return b
	}},
	{"counter", func(r *rand.Rand, n int) []byte {
		b := make([]byte, n+4)
		v := r.Uint32()
		for i := 0; i+4 <= len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], v)
			v += uint32(r.IntN(3))
		}
		return b[:n]
	}},
	{"sprinkled", func(r *rand.Rand, n int) []byte {
		b := textBytes(r, n)
		for range n / 16 {
			b[r.IntN(n)] = byte(r.Uint32())
		}
		return b
	}},
}

// TestFramesDecodeWithReferenceZstd encodes every size from 1 byte
// to past the 1 KiB threshold, in every content kind, with the encoder
// SealBlob picks at the fastest setting, and decodes all of the frames
// with the reference zstd tool. Frames below 1 KiB that hold a compressed
// block must carry their literals raw (or RLE), as docs/format.md says;
// the frames of blobs SealBlob actually compresses are checked through
// SealBlob too.
func TestFramesDecodeWithReferenceZstd(t *testing.T) {
	zstdPath, err := exec.LookPath("zstd")
	if err != nil {
		t.Skip("the zstd tool is not installed")
	}
	r := seedtest.Rand(t)
	dir := t.TempDir()
	type frame struct {
		name  string
		plain []byte
	}
	var frames []frame
	add := func(name string, plain, z []byte) {
		p := filepath.Join(dir, fmt.Sprintf("f%05d", len(frames)))
		if err := os.WriteFile(p+".zst", z, 0o600); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, frame{name, plain})
	}
	const maxN = fastLiteralsBelow + 100
	compressedBlocks, sealedCompressed := 0, 0
	for n := 1; n <= maxN; n++ {
		for _, kind := range zstdKinds {
			plain := kind.gen(r, n)
			enc, err := encoderFor(CompressFastest, n)
			if err != nil {
				t.Fatal(err)
			}
			z := enc.EncodeAll(plain, nil)
			name := fmt.Sprintf("%s, %d bytes", kind.name, n)
			lit, compressed, err := zstdLiteralsType(z)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if compressed {
				compressedBlocks++
				if n < fastLiteralsBelow && lit != 0 && lit != 1 {
					t.Fatalf("%s: literals block type %d, want raw (0) or RLE (1) below %d bytes", name, lit, fastLiteralsBelow)
				}
			}
			add(name, plain, z)
			if n < fastRawBelow || n%5 != 0 {
				continue
			}
			sb := sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)
			if sb.Flags != FlagZstd {
				sb.Release()
				continue
			}
			sealedCompressed++
			z2, err := wsKeys.Open(nil, sb.Data, blobAAD(wsKeys.Tier, sb.Type, sb.Flags, sb.ID))
			sb.Release()
			if err != nil {
				t.Fatal(err)
			}
			add(name+" (SealBlob)", plain, z2)
		}
	}
	t.Logf("%d frames, %d with a compressed block, %d from SealBlob", len(frames), compressedBlocks, sealedCompressed)
	if compressedBlocks < len(frames)/3 || sealedCompressed < 100 {
		t.Fatalf("too few compressed frames to test: %d blocks, %d sealed", compressedBlocks, sealedCompressed)
	}
	const batch = 1000
	for lo := 0; lo < len(frames); lo += batch {
		args := []string{"-d", "-q", "-f"}
		for i := lo; i < min(lo+batch, len(frames)); i++ {
			args = append(args, filepath.Join(dir, fmt.Sprintf("f%05d.zst", i)))
		}
		if out, err := exec.Command(zstdPath, args...).CombinedOutput(); err != nil {
			t.Fatalf("zstd -d on frames %d to %d: %v\n%s", lo, lo+batch-1, err, out)
		}
	}
	for i, f := range frames {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if !bytes.Equal(got, f.plain) {
			t.Fatalf("%s: zstd -d gives %d different bytes", f.name, len(got))
		}
	}
}

// zstdLiteralsType parses a single-block zstd frame (RFC 8878, 3.1.1)
// and returns the literals block type of its block when that block is
// compressed.
func zstdLiteralsType(z []byte) (lit int, compressed bool, err error) {
	if len(z) < 6 || binary.LittleEndian.Uint32(z) != 0xFD2FB528 {
		return 0, false, fmt.Errorf("no zstd frame")
	}
	fhd := z[4]
	single := fhd&0x20 != 0
	pos := 5
	if !single {
		pos++ // window descriptor
	}
	pos += []int{0, 1, 2, 4}[fhd&3] // dictionary id
	fcs := []int{0, 2, 4, 8}[fhd>>6]
	if fcs == 0 && single {
		fcs = 1
	}
	pos += fcs
	if pos+3 > len(z) {
		return 0, false, fmt.Errorf("frame of %d bytes ends in its header", len(z))
	}
	bh := uint32(z[pos]) | uint32(z[pos+1])<<8 | uint32(z[pos+2])<<16
	if bh&1 == 0 {
		return 0, false, fmt.Errorf("more than one block")
	}
	if (bh>>1)&3 != 2 {
		return 0, false, nil
	}
	if pos+4 > len(z) {
		return 0, false, fmt.Errorf("compressed block without content")
	}
	return int(z[pos+3] & 3), true, nil
}
