package chunk_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"lifeboat/chunk"
	"lifeboat/internal/seedtest"
)

var (
	mixedOnce sync.Once
	mixedData []byte
)

// mixed returns 64 MiB alternating 1 MiB of random bytes (compressed or
// encrypted files) and 1 MiB of text (source code, documents).
func mixed() []byte {
	mixedOnce.Do(func() {
		r := rand.New(rand.NewPCG(3, 4))
		words := []string{"the", "backup", "func", "return", "err", "nil", "if", "for", "package", "lifeboat",
			"snapshot", "{", "}", "(", ")", "data", "chunk", "index", "\n", "\t", "// comment", "0x1f", "import"}
		var b bytes.Buffer
		for b.Len() < 64<<20 {
			if b.Len()>>20%2 == 0 {
				b.Write(seedtest.Bytes(r, 1<<20))
				continue
			}
			for end := b.Len() + 1<<20; b.Len() < end; {
				b.WriteString(words[r.IntN(len(words))])
				b.WriteByte(' ')
			}
		}
		mixedData = b.Bytes()[:64<<20]
	})
	return mixedData
}

func BenchmarkChunk(b *testing.B) {
	data := mixed()
	rd := bytes.NewReader(data)
	c := chunk.New(rd, testPol, chunk.DefaultParams)
	buf := make([]byte, c.BufSize())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for b.Loop() {
		rd.Reset(data)
		c.Reset(rd)
		for {
			_, err := c.Next(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(len(data))/float64(n)*float64(b.N)/1024, "KiB/chunk")
}

// BenchmarkChunkParallel runs one chunker per goroutine, as a backup of
// many files does.
func BenchmarkChunkParallel(b *testing.B) {
	data := mixed()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rd := bytes.NewReader(data)
		c := chunk.New(rd, testPol, chunk.DefaultParams)
		buf := make([]byte, c.BufSize())
		for pb.Next() {
			rd.Reset(data)
			c.Reset(rd)
			for {
				if _, err := c.Next(buf); err == io.EOF {
					break
				} else if err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}
