package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes a small seeded tree: text files, one random 3 MiB file.
func writeTree(t *testing.T, dir string, seed uint64) {
	t.Helper()
	t.Logf("tree %s: seed %d", dir, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range 20 {
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		s := strings.Repeat(fmt.Sprintf("line %d of file %d seed %d\n", rng.IntN(1000), i, seed), 1+rng.IntN(3000))
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
}
