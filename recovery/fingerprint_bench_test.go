package recovery

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFingerprint: the periodic round's look at an unchanged
// workspace of 20,000 files in 400 directories (two levels).
func BenchmarkFingerprint(b *testing.B) {
	dir := b.TempDir()
	for d := range 400 {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", d/20), fmt.Sprintf("mod%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 50 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%02d.go", f)), []byte("package x\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	salt := make([]byte, 32)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fingerprint(salt, dir, nil); err != nil {
			b.Fatal(err)
		}
	}
}
