package index_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
)

var update = flag.Bool("update", false, "rewrite the seed corpus in testdata/fuzz/FuzzDecode")

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, and
// whatever it accepts must re-encode to the same bytes and decode again to
// an equal object.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := index.Decode(b)
		if err != nil {
			if o != nil {
				t.Fatalf("Decode returned an object with error %v", err)
			}
			return
		}
		enc := o.Encode()
		if !bytes.Equal(enc, b) {
			t.Fatalf("Encode(Decode(b)) differs from b:\n b   %x\n enc %x", b, enc)
		}
		o2, err := index.Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded object does not decode: %v", err)
		}
		if !equalObjects(o, o2) {
			t.Fatalf("re-decoded object differs:\n%+v\n%+v", o, o2)
		}
	})
}

type fuzzSeed struct {
	name string
	data []byte
}

// fuzzSeeds are the seed corpus: valid objects and damaged ones. They are
// built deterministically so the files in testdata pin the format.
func fuzzSeeds() []fuzzSeed {
	r := rand.New(rand.NewPCG(1, 2))
	sample := sampleObject().Encode()
	random := randObject(r, blob.Sensitive, 3, 4)
	random.Supersedes = []blob.ID{randID(r)}
	randomEnc := random.Encode()
	lying := bytes.Clone(sample)
	binary.LittleEndian.PutUint32(lying[6:], 0xFFFFFFFF)
	badEntry := bytes.Clone(sample)
	badEntry[6+4+2*blob.IDSize+4+blob.IDSize+4+4] = 3 // first entry's type
	return []fuzzSeed{
		{"valid-sample", sample},
		{"valid-empty", (&index.Object{Tier: blob.Workspace}).Encode()},
		{"valid-random", randomEnc},
		{"truncated", sample[:len(sample)/2]},
		{"trailing", append(bytes.Clone(sample), 0)},
		{"lying-count", lying},
		{"bad-entry", badEntry},
		{"bad-magic", append([]byte("LBIY"), sample[4:]...)},
	}
}

func corpusFile(data []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
}

// TestFuzzCorpus checks the seed corpus on disk against fuzzSeeds (rerun
// with -update after a deliberate format change).
func TestFuzzCorpus(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for _, s := range fuzzSeeds() {
		path := filepath.Join(dir, s.name)
		want := corpusFile(s.data)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestFuzzCorpus -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the seed built by this code: the index format changed? (-update to accept)", path)
		}
		_, err = index.Decode(s.data)
		if valid := len(s.name) > 6 && s.name[:6] == "valid-"; valid != (err == nil) {
			t.Errorf("seed %s: Decode error %v", s.name, err)
		}
	}
}
