package snapshot

import (
	"fmt"
	"math/rand/v2"
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
