package pack

import (
	"math/rand/v2"
	"sync"
	"testing"

	"lifeboat/blob"
	"lifeboat/internal/seedtest"
)

// benchChunk is the mean chunk size of chunk.DefaultParams.
const benchChunk = 768 << 10

type benchInput struct {
	name string
	c    Compression
	gen  func(*rand.Rand, int) []byte
}

var benchInputs = []benchInput{
	{"text/fastest", CompressFastest, textBytes}, // the repository default
	{"text/default", CompressDefault, textBytes},
	{"text/better", CompressBetter, textBytes},
	{"random/fastest", CompressFastest, seedtest.Bytes}, // incompressible: compressed, then stored raw
	{"random/off", CompressOff, seedtest.Bytes},
}

// resetCodecs drops the cached zstd encoders and decoder. They size their
// concurrency from GOMAXPROCS at first use, so without this a -cpu=2 run
// after a -cpu=1 run would share one encoder between two goroutines.
// Benchmarks run one at a time, so nothing uses the codecs meanwhile.
func resetCodecs() {
	encoders.Range(func(k, _ any) bool { encoders.Delete(k); return true })
	decOnce, decoder, decoderErr = sync.Once{}, nil, nil
}

// benchChunks returns 8 distinct chunks of the input.
func benchChunks(in benchInput) [][]byte {
	r := rand.New(rand.NewPCG(5, 6))
	chunks := make([][]byte, 8)
	for i := range chunks {
		chunks[i] = in.gen(r, benchChunk)
	}
	return chunks
}

// sealBenchSetup resets the codecs, sets b to count one chunk's bytes
// and the allocations per op, and returns in's chunks and their
// workspace ids.
func sealBenchSetup(b *testing.B, in benchInput) ([][]byte, []blob.ID) {
	resetCodecs()
	chunks := benchChunks(in)
	ids := make([]blob.ID, len(chunks))
	for i, c := range chunks {
		ids[i] = wsKeys.BlobID(c)
	}
	b.SetBytes(benchChunk)
	b.ReportAllocs()
	return chunks, ids
}

// BenchmarkSealBlob measures compress + encrypt + the verifying
// decrypt/decompress of one 768 KiB chunk on one goroutine.
func BenchmarkSealBlob(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			chunks, ids := sealBenchSetup(b, in)
			i := 0
			var stored int
			for b.Loop() {
				sb, err := SealBlob(wsKeys, blob.Data, ids[i%len(chunks)], chunks[i%len(chunks)], in.c)
				if err != nil {
					b.Fatal(err)
				}
				stored += len(sb.Data)
				i++
			}
			b.ReportMetric(float64(stored)/float64(i*benchChunk), "stored/plain")
		})
	}
}

// BenchmarkSealBlobParallel runs SealBlob on every CPU -cpu allows, as the
// backup pipeline does; compare -cpu=1 and -cpu=2.
func BenchmarkSealBlobParallel(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			chunks, ids := sealBenchSetup(b, in)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(len(chunks))
				for pb.Next() {
					if _, err := SealBlob(wsKeys, blob.Data, ids[i%len(chunks)], chunks[i%len(chunks)], in.c); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

func sealedBenchChunks(b *testing.B, in benchInput) []SealedBlob {
	var sealed []SealedBlob
	for _, c := range benchChunks(in) {
		sb, err := SealBlob(wsKeys, blob.Data, wsKeys.BlobID(c), c, in.c)
		if err != nil {
			b.Fatal(err)
		}
		sealed = append(sealed, sb)
	}
	return sealed
}

// BenchmarkOpenBlob measures decrypt + decompress of one 768 KiB chunk
// into a reused buffer, as a restore does.
func BenchmarkOpenBlob(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			resetCodecs()
			sealed := sealedBenchChunks(b, in)
			buf := make([]byte, 0, benchChunk)
			b.SetBytes(benchChunk)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				sb := sealed[i%len(sealed)]
				out, err := OpenBlob(wsKeys, entryOf(sb), sb.Data, buf)
				if err != nil {
					b.Fatal(err)
				}
				buf = out[:0]
				i++
			}
		})
	}
}

func BenchmarkOpenBlobParallel(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			resetCodecs()
			sealed := sealedBenchChunks(b, in)
			b.SetBytes(benchChunk)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 0, benchChunk)
				i := rand.IntN(len(sealed))
				for pb.Next() {
					sb := sealed[i%len(sealed)]
					out, err := OpenBlob(wsKeys, entryOf(sb), sb.Data, buf)
					if err != nil {
						b.Error(err)
						return
					}
					buf = out[:0]
					i++
				}
			})
		})
	}
}

// BenchmarkWriterFinish measures sealing a pack's header and padding it,
// for a 16 MiB pack of 768 KiB blobs.
func BenchmarkWriterFinish(b *testing.B) {
	sealed := sealedBenchChunks(b, benchInputs[3])
	b.ReportAllocs()
	for b.Loop() {
		w := NewWriter(wsKeys, 16<<20)
		for i := 0; w.Size() < 16<<20; i++ {
			w.Add(sealed[i%len(sealed)])
		}
		w.Finish()
	}
}
