package profile

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/seedtest"
)

// TestDiscoverMatchesOld builds random trees with markers (regular files,
// symlinks, directories, FIFOs) at random places, profiles nested in
// profiles, symlinks to profiles and names that are not UTF-8, and checks
// that Discover finds exactly what the former algorithm finds, from the
// root and through a symlink to it.
func TestDiscoverMatchesOld(t *testing.T) {
	rng := seedtest.Rand(t)
	found := map[Kind]int{}
	for i := range 100 {
		ws := t.TempDir()
		randomTree(t, rng, ws, ws, 0)
		want, err := discoverRef(ws)
		must(t, err)
		for _, p := range want {
			found[p.Kind]++
		}
		compareWithRef(t, ws)
		if i%10 == 0 {
			link := filepath.Join(t.TempDir(), "ws")
			must(t, os.Symlink(ws, link))
			compareWithRef(t, link)
		}
	}
	t.Logf("profiles found in 100 trees: %v", found)
	if found[Chromium] == 0 || found[Firefox] == 0 {
		t.Fatalf("the random trees held too few profiles of a kind (%v): the comparison is too weak", found)
	}
}

// randomNames sort around one another and around the markers.
var randomNames = []string{"a", "b", "A", "a-b", "a.b", "a b", "Default", "Profile 1", "é", "\xff\xfe", "z\x01", "Preferences"}

// randomTree fills dir (depth levels below the workspace ws) with random
// entries.
func randomTree(t *testing.T, rng *rand.Rand, ws, dir string, depth int) {
	t.Helper()
	var names []string
	if rng.IntN(3) == 0 { // a profile-like directory: some markers
		for _, m := range markerNames {
			if rng.IntN(2) == 0 {
				names = append(names, m)
			}
		}
	}
	for range rng.IntN(6) {
		names = append(names, randomNames[rng.IntN(len(randomNames))])
	}
	for _, name := range names {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err == nil {
			continue // drawn twice
		}
		switch r := rng.IntN(20); {
		case r < 8 && depth < 5:
			must(t, os.Mkdir(p, 0o755))
			randomTree(t, rng, ws, p, depth+1)
		case r < 14:
			must(t, os.WriteFile(p, nil, 0o644))
		case r < 16: // a symlink to somewhere in the workspace (maybe a profile), or dangling
			targets := []string{ws, dir, filepath.Join(ws, "a"), filepath.Join(dir, "profiles.ini"), "missing"}
			must(t, os.Symlink(targets[rng.IntN(len(targets))], p))
		case r < 18:
			must(t, os.Mkdir(p, 0o755))
		case r < 19:
			must(t, unix.Mkfifo(p, 0o644))
		default: // a Chromium profile folder
			must(t, os.Mkdir(p, 0o755))
			must(t, os.WriteFile(filepath.Join(p, "Preferences"), nil, 0o644))
		}
	}
}
