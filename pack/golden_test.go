package pack

import (
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/internal/seedtest"
)

var update = flag.Bool("update", false, "rewrite the pinned sample pack testdata/golden-v1.pack")

const goldenPack = "testdata/golden-v1.pack"

// goldenBlobs are the deterministic contents of the sample pack (they
// depend on textBytes and seedtest.Bytes: changing those needs -update).
func goldenBlobs() (types []blob.Type, plains [][]byte) {
	r := rand.New(rand.NewPCG(7, 7))
	return []blob.Type{blob.Tree, blob.Data, blob.Data}, [][]byte{textBytes(r, 20_000), seedtest.Bytes(r, 3000), nil}
}

// TestGoldenPackV1 opens a pack written once by this code (with the fixed
// test keys) and checks every layer of it: a change to the trailer, header,
// blob AAD, compression flag or keyed blob ids makes it fail.
func TestGoldenPackV1(t *testing.T) {
	t.Parallel()
	types, plains := goldenBlobs()
	if *update {
		w := NewWriter(wsKeys, 0)
		for i, p := range plains {
			c := CompressDefault
			if i == 1 {
				c = CompressOff
			}
			w.Add(sealBlob(t, wsKeys, types[i], p, c))
		}
		data, _, _, _, _ := w.Finish()
		if err := os.WriteFile(goldenPack, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(goldenPack)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	id := blob.ID(blake3.Sum256(data))
	tr, entries, err := Verify(data, id, bothTiers)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Tier != blob.Workspace || len(entries) != len(plains) {
		t.Fatalf("trailer %+v, %d entries", tr, len(entries))
	}
	l := &loader{data: data}
	if _, got, err := ReadHeader(context.Background(), int64(len(data)), l.load, bothTiers); err != nil || !slices.Equal(got, entries) {
		t.Fatalf("ReadHeader: %v", err)
	}
	wantFlags := []uint8{FlagZstd, 0, 0}
	for i, e := range entries {
		if e.Type != types[i] || e.Flags != wantFlags[i] || e.ID != wsKeys.BlobID(plains[i]) || e.PlainLen != uint32(len(plains[i])) {
			t.Fatalf("entry %d = %+v", i, e)
		}
		got, err := OpenBlob(wsKeys, e, data[e.Offset:e.Offset+e.Length], nil)
		if err != nil || !bytes.Equal(got, plains[i]) {
			t.Fatalf("blob %d: %v", i, err)
		}
	}
	if int64(len(data)) != padme(int64(len(data))) {
		t.Fatalf("sample pack of %d bytes is not a Padmé length", len(data))
	}
}
