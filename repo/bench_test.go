package repo

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"lifeboat/backend/local"
	"lifeboat/blob"
)

// benchData is 64 MiB like a workspace: half incompressible (weights,
// archives), half text-like (source, logs).
func benchData() []byte {
	rng := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, 64<<20)
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
				c, _ := r.Chunker(blob.Workspace)
				if _, _, err := r.SaveStream(context.Background(), blob.Workspace, c, bytes.NewReader(data[p*part:(p+1)*part])); err != nil {
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

// BenchmarkStages is the ceiling the save path is measured against: the
// four CPU stages (chunk, keyed BLAKE3, zstd fastest, XChaCha20-Poly1305)
// back to back on the same data, one stream per GOMAXPROCS, nothing else.
func BenchmarkStages(b *testing.B) {
	data := benchData()
	procs := runtime.GOMAXPROCS(0)
	r := benchRepo(b)
	k, _ := r.TierKeys(blob.Workspace)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(procs))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		part := len(data) / procs
		for p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, _ := r.Chunker(blob.Workspace)
				c.Reset(bytes.NewReader(data[p*part : (p+1)*part]))
				buf := make([]byte, c.BufSize())
				var z, sealed []byte
				for {
					chunk, err := c.Next(buf)
					if err == io.EOF {
						return
					}
					_ = k.BlobID(chunk)
					z = enc.EncodeAll(chunk, z[:0])
					sealed = k.Seal(sealed[:0], z, nil)
				}
			}()
		}
		wg.Wait()
	}
}

// BenchmarkLoadBlob loads, decrypts, decompresses and verifies stored blobs.
func BenchmarkLoadBlob(b *testing.B) {
	data := benchData()
	r := benchRepo(b)
	c, _ := r.Chunker(blob.Workspace)
	ids, _, err := r.SaveStream(context.Background(), blob.Workspace, c, bytes.NewReader(data))
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
