package capture

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"lifeboat/internal/seedtest"
	"lifeboat/snapshot/internal/snaptest"
	"lifeboat/snapshot/restore"
)

// End to end: real Run then Restore of random trees.
func TestCaptureRestoreRandom(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)
	r := capTestOpenRepo(t)
	for round := range 8 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "src")
			mkdirAll(t, root)
			var files []string
			capTestRandomTree(t, rng, root, 0, &files)
			o := capTestOptions(nil)
			o.Cache = r.FileCache()
			m := capTestCapture(t, r, root, o)
			if !m.Complete {
				t.Fatalf("errors: %v", m.Errors)
			}
			target := filepath.Join(base, "t")
			if _, err := restore.Run(t.Context(), r, m, restore.Options{Target: target}); err != nil {
				t.Fatal(err)
			}
			if want, got := snaptest.Dump(t, root, false), snaptest.Dump(t, target, false); want != got {
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
