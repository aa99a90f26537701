package index_test

import (
	"os"
	"path/filepath"
	"testing"

	"lifeboat/index"
)

func TestScratchIntraPage(t *testing.T) {
	r := newRand(t)
	dir, _ := filledDB(t, r)
	path := filepath.Join(dir, "index.db")
	b, _ := os.ReadFile(path)
	used := usedSize(t, path)
	for i := 0; i < 3; i++ {
		pg := 2 + r.IntN(used/4096-2)
		for j := pg*4096 + 3000; j < pg*4096+4096; j++ {
			b[j] = byte(r.Uint32())
		}
	}
	os.WriteFile(path, b, 0o600)
	d, err := index.OpenDB(dir, testRepo)
	t.Logf("open: %v", err)
	if err == nil {
		n, _, err := d.Count()
		t.Logf("count %d %v", n, err)
		d.Close()
	}
}
