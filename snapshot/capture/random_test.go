package capture

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/seedtest"
	"lifeboat/snapshot/internal/snaptest"
)

// capTestRandomName returns a name of random bytes (no '/' or NUL).
func capTestRandomName(rng *rand.Rand) string {
	for {
		b := make([]byte, 1+rng.IntN(24))
		for i := range b {
			for b[i] == 0 || b[i] == '/' {
				b[i] = byte(rng.Uint32())
			}
		}
		if s := string(b); s != "." && s != ".." {
			return s
		}
	}
}

// capTestRandomTree fills dir with random entries of every kind, and
// returns the regular files made (for hard links).
func capTestRandomTree(t *testing.T, rng *rand.Rand, dir string, depth int, files *[]string) {
	t.Helper()
	for range rng.IntN(12) {
		p := filepath.Join(dir, capTestRandomName(rng))
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		var err error
		switch k := rng.IntN(10); {
		case k < 5:
			b := make([]byte, []int{0, 1, 100, 5000, 600 << 10}[rng.IntN(5)])
			for i := range b {
				b[i] = byte(rng.Uint32() >> 28) // compressible, with repeats across files
			}
			if err = os.WriteFile(p, b, 0o600); err == nil {
				err = os.Chmod(p, os.FileMode(0o400|rng.Uint32N(0o1000))|[]os.FileMode{0, os.ModeSetuid, os.ModeSetgid}[rng.IntN(3)])
				*files = append(*files, p)
			}
		case k < 7 && depth < 6:
			if err = os.Mkdir(p, 0o700); err == nil {
				capTestRandomTree(t, rng, p, depth+1, files)
				err = os.Chmod(p, os.FileMode(0o500|rng.Uint32N(0o1000))|[]os.FileMode{0, os.ModeSticky}[rng.IntN(2)])
			}
		case k < 8:
			err = os.Symlink(capTestRandomName(rng)+"/../"+capTestRandomName(rng), p)
		case k < 9 && len(*files) > 0:
			err = os.Link((*files)[rng.IntN(len(*files))], p)
		default:
			err = unix.Mkfifo(p, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestCaptureRandomTrees(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)
	r := capTestOpenRepo(t)
	for round := range 5 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			root := t.TempDir()
			var files []string
			capTestRandomTree(t, rng, root, 0, &files)
			o := capTestOptions(nil)
			o.Readers = 1 + rng.IntN(8)
			m := capTestCapture(t, r, root, o)
			if !m.Complete {
				t.Fatalf("errors: %v", m.Errors)
			}
			capTestCompare(t, r, root, m)
			// The same tree again gives the same root.
			if m2 := capTestCapture(t, r, root, o); m2.Root.Subtree[0] != m.Root.Subtree[0] {
				t.Errorf("second capture: root %v, first %v", m2.Root.Subtree, m.Root.Subtree)
			}
		})
	}
	snaptest.Check(t, r)
}
