package snapshot

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/blob"
)

// benchNodes returns n file nodes of a source directory, sorted by name,
// each with two content ids, as capture writes them.
func benchNodes(n int) []Node {
	r := rand.New(rand.NewPCG(1, 2))
	nodes := make([]Node, n)
	for i := range nodes {
		var a, b blob.ID
		for j := range a {
			a[j], b[j] = byte(r.Uint32()), byte(r.Uint32())
		}
		nodes[i] = Node{Name: []byte(fmt.Sprintf("file%06d.go", i)), Type: TypeFile, Mode: 0o644, UID: 1000, GID: 1000,
			MtimeNs: 1_767_000_000_000_000_000 + r.Int64N(1e15), Size: uint64(1 + r.IntN(64<<10)), Content: []blob.ID{a, b}}
	}
	return nodes
}

// BenchmarkTreeEncode measures encoding one tree blob of 1,000 file
// entries (the stage capture runs per directory); B/s is of the encoding.
func BenchmarkTreeEncode(b *testing.B) {
	nodes := benchNodes(1000)
	enc, err := EncodeTree(nodes)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeTree(nodes); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(nodes)), "ns/node")
}

// BenchmarkTreeDecode measures decoding and checking the same tree blob
// (the stage restore and re-capture run per directory).
func BenchmarkTreeDecode(b *testing.B) {
	enc, err := EncodeTree(benchNodes(1000))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeTree(enc); err != nil {
			b.Fatal(err)
		}
	}
}

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
