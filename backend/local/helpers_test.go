package local

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
)

func newRepo(t *testing.T) *Backend {
	t.Helper()
	b, err := Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var rng = rand.New(rand.NewPCG(7, 7))

// packOf returns random data of n bytes and its content-addressed handle.
func packOf(n int) (backend.Handle, []byte) {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sum := sha256.Sum256(data)
	return backend.Handle{Type: backend.Pack, Name: hex.EncodeToString(sum[:])}, data
}

// savePack saves a new random pack of n bytes in b and returns its
// handle and data.
func savePack(t *testing.T, b *Backend, n int) (backend.Handle, []byte) {
	t.Helper()
	h, data := packOf(n)
	if err := b.Save(t.Context(), h, data); err != nil {
		t.Fatal(err)
	}
	return h, data
}

// tmpEntries lists what is left in the repository's tmp/.
func tmpEntries(t *testing.T, b *Backend) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(b.dir, tmpDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
