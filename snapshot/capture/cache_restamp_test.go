package capture

import (
	"fmt"
	"slices"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/pack"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// The entries a capture writes are found and trusted by the next one,
// for files of several chunks and for a directory of thousands of files;
// a cache hit whose record's generation is old (a blob left the index
// since) is used once its chunks are looked up, leaves its node's content
// intact, and is written back in a record stamped with the current
// generation, so the capture after that trusts it by its generation.
func TestCacheEntriesTrustedAfterRestamp(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)
	root := t.TempDir()
	files := map[string]string{}
	big := make([]byte, 3<<20) // several chunks (256 KiB minimum, 512 KiB average)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	files["big"] = string(big)
	// A directory of thousands of entries: one large record.
	for i := range capChunk + 100 {
		files[fmt.Sprintf("many/f%d", i)] = fmt.Sprintf("small file %d, %d\n", i, rng.Uint64())
	}
	var total int64
	for _, c := range files {
		total += int64(len(c))
	}
	capTestWrite(t, root, files)
	capTestAge(t, root)
	tr := newCapTestRepo(t)
	r := tr.open(t)
	o, read := capTestCacheOptions(r)
	k, err := r.TierKeys(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	_ = k
	gen := func() uint64 {
		t.Helper()
		g, err := r.Index().FileCacheGen()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// check: every file's entry holds its node's content, in a record
	// stamped with want.
	check := func(step string, m *snapshot.Manifest, want uint64) {
		t.Helper()
		nodes := capTestFlatten(t, r, m.Root.Subtree)
		if n := len(nodes["big"].Content); n < 2 {
			t.Fatalf("%s: big is %d chunks, want several", step, n)
		}
		bad := 0
		for p := range files {
			e, gen, ok := capTestCacheEntry(t, r, o.Workspace, p)
			switch {
			case !ok:
				t.Errorf("%s: %s: no cache entry", step, p)
			case !slices.Equal(e.Content, nodes[p].Content):
				t.Errorf("%s: %s: cached content %d ids, node %d ids", step, p, len(e.Content), len(nodes[p].Content))
			case gen != want:
				t.Errorf("%s: %s: record of generation %d, want %d", step, p, gen, want)
			default:
				continue
			}
			if bad++; bad == 5 {
				t.Fatalf("%s: more bad entries", step)
			}
		}
	}

	m1 := capTestCapture(t, r, root, o)
	if read.Load() != total {
		t.Fatalf("first capture read %d bytes, want %d", read.Load(), total)
	}
	g0 := gen()
	check("first capture", m1, g0)

	// A blob leaves the index (a pack of an index object dropped, as
	// prune does): the generation moves on, and every entry is old.
	var objID, packID, blobID blob.ID
	for _, id := range []*blob.ID{&objID, &packID, &blobID} {
		for j := range id {
			id[j] = byte(rng.Uint32())
		}
	}
	fake := &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{{ID: packID, Size: 1000,
		Entries: []pack.Entry{{Type: blob.Data, ID: blobID, Length: crypt.Overhead + 10, PlainLen: 10}}}}}
	if err := r.Index().Apply(objID, fake); err != nil {
		t.Fatal(err)
	}
	if err := r.Index().Drop([]blob.ID{objID}, map[blob.ID]bool{packID: true}); err != nil {
		t.Fatal(err)
	}
	g1 := gen()
	if g1 == g0 {
		t.Fatalf("the generation did not move (%d)", g0)
	}

	// Every hit is old: looked up chunk by chunk, used, and stamped anew.
	read.Store(0)
	m2 := capTestCapture(t, r, root, o)
	if read.Load() != 0 {
		t.Errorf("the capture after the drop read %d bytes, want 0 (old entries are looked up, not dropped)", read.Load())
	}
	if !slices.Equal(m1.Root.Subtree, m2.Root.Subtree) {
		t.Errorf("the capture after the drop differs: %v, then %v", m1.Root.Subtree, m2.Root.Subtree)
	}
	capTestCompare(t, r, root, m2) // the nodes filled from the old entries
	check("capture after the drop", m2, g1)

	// Stamped with the current generation: trusted as they are.
	read.Store(0)
	m3 := capTestCapture(t, r, root, o)
	if read.Load() != 0 {
		t.Errorf("the third capture read %d bytes, want 0", read.Load())
	}
	capTestCompare(t, r, root, m3)
	check("third capture", m3, g1)
	snaptest.Check(t, r)
}
