package restore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRestoreWrite measures restore's write stage alone: a fresh
// 8.25 MiB file written chunk by chunk (11 of 768 KiB) with the sparse-aware
// pwrite restore uses, into the page cache (no fsync). "half-zero" has
// every other 4 KiB block zero, which becomes a hole.
func BenchmarkRestoreWrite(b *testing.B) {
	const chunk, chunks = 768 << 10, 11
	for _, name := range []string{"dense", "half-zero"} {
		b.Run(name, func(b *testing.B) {
			data := make([]byte, chunk)
			r := rand.New(rand.NewPCG(3, 4))
			for i := range data {
				if name == "dense" || (i/rsBlock)%2 == 0 {
					data[i] = byte(r.Uint32() | 1)
				}
			}
			dir := b.TempDir()
			b.SetBytes(chunk * chunks)
			i := 0
			for b.Loop() {
				p := filepath.Join(dir, fmt.Sprint(i))
				i++
				f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				for c := range chunks {
					if _, err := rsWriteSparse(int(f.Fd()), data, int64(c*chunk)); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Truncate(chunk * chunks); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.Remove(p); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
