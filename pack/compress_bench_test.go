package pack

import (
	"testing"

	"github.com/klauspost/compress/zstd"
)

// BenchmarkCompress measures the zstd stage alone (EncodeAll of one
// 768 KiB chunk at each level, one goroutine), without the encryption
// and verification SealBlob adds around it. "random/fastest" includes the
// sample test that lets incompressible chunks skip the full pass.
func BenchmarkCompress(b *testing.B) {
	for _, in := range benchInputs {
		if in.c == CompressOff {
			continue
		}
		b.Run(in.name, func(b *testing.B) {
			enc, chunks := benchEncoder(b, in)
			dst := make([]byte, 0, benchChunk+benchChunk/8)
			b.SetBytes(benchChunk)
			b.ReportAllocs()
			i, out := 0, 0
			for b.Loop() {
				c := chunks[i%len(chunks)]
				i++
				if !worthCompressing(enc, c) {
					continue
				}
				out += len(enc.EncodeAll(c, dst[:0]))
			}
			if i > 0 && out > 0 {
				b.ReportMetric(float64(out)/float64(i*benchChunk), "ratio")
			}
		})
	}
}

// BenchmarkDecompress measures zstd decoding of one 768 KiB chunk, the
// stage restore and the verification of each new blob pay.
func BenchmarkDecompress(b *testing.B) {
	in := benchInputs[0] // text, fastest: the repository default
	resetCodecs()
	enc, err := encoderFor(in.c, benchChunk)
	if err != nil {
		b.Fatal(err)
	}
	dec, err := getDecoder()
	if err != nil {
		b.Fatal(err)
	}
	var zs [][]byte
	for _, c := range benchChunks(in) {
		zs = append(zs, enc.EncodeAll(c, nil))
	}
	dst := make([]byte, 0, benchChunk)
	b.SetBytes(benchChunk)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := dec.DecodeAll(zs[i%len(zs)], dst[:0]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkWorthCompressing measures the sample test alone on one 768 KiB
// chunk: a compressible chunk is settled by its first 16 KiB slice, an
// incompressible one compresses all three slices.
func BenchmarkWorthCompressing(b *testing.B) {
	for _, in := range benchInputs {
		if in.c != CompressFastest {
			continue
		}
		b.Run(in.name, func(b *testing.B) {
			enc, chunks := benchEncoder(b, in)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				worthCompressing(enc, chunks[i%len(chunks)])
				i++
			}
		})
	}
}

// benchEncoder resets the codecs and returns the encoder for in's level
// and its chunks.
func benchEncoder(b *testing.B, in benchInput) (*zstd.Encoder, [][]byte) {
	resetCodecs()
	enc, err := encoderFor(in.c, benchChunk)
	if err != nil {
		b.Fatal(err)
	}
	return enc, benchChunks(in)
}
