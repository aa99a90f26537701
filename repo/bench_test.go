package repo

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"

	"lifeboat/backend/local"
	"lifeboat/blob"
)

// benchData is benchSize bytes like a workspace: half incompressible (weights,
// archives), half text-like (source, logs).
// benchSize is large enough that the final flush does not dominate.
const benchSize = 192 << 20

func benchData() []byte {
	rng := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, benchSize)
	half := len(b) / 2
	for i := 0; i < half; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	words := []string{"func ", "return ", "if err != nil {", "\n\t", "package ", "import ", "// comment ", "x := ", "}\n", "for i := range "}
	var tb bytes.Buffer
	for tb.Len() < len(b)-half {
		tb.WriteString(words[rng.IntN(len(words))])
		tb.WriteByte(byte('a' + rng.IntN(26)))
	}
	copy(b[half:], tb.Bytes())
	return b
}

func benchRepo(b *testing.B) *Repository {
	dir := b.TempDir()
	be, err := local.Create(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Init(context.Background(), be, testPassword, InitOptions{KDF: testKDF()}); err != nil {
		b.Fatal(err)
	}
	r, err := Open(context.Background(), be, testPassword, Options{CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// BenchmarkSavePath measures the whole save path: chunk, id, dedup lookup,
// compress, seal, verify, pack and write to the local backend with fsync,
// one stream per GOMAXPROCS (run with -cpu=1,2).
func BenchmarkSavePath(b *testing.B) {
	data := benchData()
	procs := runtime.GOMAXPROCS(0)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r := benchRepo(b)
		b.StartTimer()
		var wg sync.WaitGroup
		part := len(data) / procs
		for p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := r.SaveStream(context.Background(), blob.Workspace, bytes.NewReader(data[p*part:(p+1)*part])); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		if err := r.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStages is the ceiling the save path is measured against, with
// the data spread evenly over GOMAXPROCS goroutines in 4 MiB slices.
// "bare" runs the four CPU stages (chunk, keyed BLAKE3, zstd fastest,
// XChaCha20-Poly1305); "verified" adds the work the format requires on top:
// opening and decompressing each sealed blob to compare it with its input,
// and hashing the sealed bytes as a pack's name.
func BenchmarkStages(b *testing.B) {
	data := benchData()
	r := benchRepo(b)
	k, _ := r.TierKeys(blob.Workspace)
	procs := runtime.GOMAXPROCS(0)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(procs))
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(procs))
	const slice = 4 << 20
	for _, verified := range []bool{false, true} {
		name := map[bool]string{false: "bare", true: "verified"}[verified]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				var next atomic.Int64
				var wg sync.WaitGroup
				for range procs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, _ := r.chunker(blob.Workspace)
						buf := make([]byte, c.BufSize())
						var z, sealed, opened, plain []byte
						for {
							off := int(next.Add(slice)) - slice
							if off >= len(data) {
								return
							}
							c.Reset(bytes.NewReader(data[off:min(off+slice, len(data))]))
							for {
								chunk, err := c.Next(buf)
								if err == io.EOF {
									break
								}
								_ = k.BlobID(chunk)
								z = enc.EncodeAll(chunk, z[:0])
								sealed = k.Seal(sealed[:0], z, nil)
								if verified {
									opened, _ = k.Open(opened[:0], sealed, nil)
									plain, _ = dec.DecodeAll(opened, plain[:0])
									_ = bytes.Equal(plain, chunk)
									_ = blake3.Sum256(sealed)
								}
							}
						}
					}()
				}
				wg.Wait()
			}
		})
	}
}

// BenchmarkLoadBlob loads, decrypts, decompresses and verifies stored blobs.
func BenchmarkLoadBlob(b *testing.B) {
	data := benchData()
	r := benchRepo(b)
	ids, _, err := r.SaveStream(context.Background(), blob.Workspace, bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var buf []byte
		for pb.Next() {
			for _, id := range ids {
				out, err := r.LoadBlob(context.Background(), blob.Workspace, blob.Data, id, buf)
				if err != nil {
					b.Error(err)
					return
				}
				buf = out[:0]
			}
		}
	})
}
