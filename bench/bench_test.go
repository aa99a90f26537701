package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestGenerateIsDeterministicAndCompareSeesChurn(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	small := Scale{SourceFiles: 30, DepFiles: 20, BinaryMiB: 1, LogKiB: 8}
	if err := Generate(a, 7, small); err != nil {
		t.Fatal(err)
	}
	if err := Generate(b, 7, small); err != nil {
		t.Fatal(err)
	}
	d, err := Compare(a, b)
	if err != nil || len(d) != 0 {
		t.Fatalf("same seed differs: %v %v", d, err)
	}
	n, err := Churn(b, 1)
	if err != nil || n == 0 {
		t.Fatalf("churn: %d %v", n, err)
	}
	d, err = Compare(a, b)
	if err != nil || len(d) < n {
		t.Fatalf("compare after churn of %d paths found %d differences: %v", n, len(d), d)
	}
	if err := os.Chmod(filepath.Join(a, "run.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	d, _ = Compare(a, b)
	found := false
	for _, x := range d {
		found = found || filepath.Base(x[:len("run.sh")]) == "run.sh"
	}
	if !found {
		t.Fatalf("mode change not seen: %v", d)
	}
}
