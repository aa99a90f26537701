package snapshot

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// End to end: real Capture then Restore of random trees.
func TestCaptureRestoreRandom(t *testing.T) {
	rng := capTestRand(t)
	r := capTestOpenRepo(t)
	for round := range 8 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "src")
			mkdirAll(t, root)
			var files []string
			capTestRandomTree(t, rng, root, 0, &files)
			o := capTestOptions(nil)
			o.Cache = r.Index()
			m := capTestCapture(t, r, root, o)
			if !m.Complete {
				t.Fatalf("errors: %v", m.Errors)
			}
			target := filepath.Join(base, "t")
			if _, err := Restore(t.Context(), r, m, RestoreOptions{Target: target}); err != nil {
				t.Fatal(err)
			}
			if want, got := rsDump(t, root, false), rsDump(t, target, false); want != got {
				t.Fatalf("differs\n%s\n---\n%s", want, got)
			}
		})
	}
}

func mkdirAll(t *testing.T, p string) {
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}
