package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// A capture of a directory that holds the repository, its index cache
// and a directory the caller names leaves the three out (the snapshot
// lists none of their files) and says so; a capture of the repository
// itself, or of a directory inside it, is refused before anything is
// read.
func TestCaptureLeavesOutOwnDirs(t *testing.T) {
	home := t.TempDir()
	writeFiles(t, home, map[string]string{"notes.txt": "work", "src/main.go": "package main"})
	repoDir := filepath.Join(home, ".local", "repo")
	cacheDir := filepath.Join(home, ".cache", "lifeboat")
	stateDir := filepath.Join(home, "state")
	must(t, os.MkdirAll(stateDir, 0o700))
	writeFiles(t, stateDir, map[string]string{"state.db": "records"})
	be, _ := repotest.Init(t, repotest.Options{Store: storetest.Store{Kind: "local", Location: repoDir}})
	r := repotest.Open(t, be, repotest.Options{Open: repo.Options{CacheDir: cacheDir}})
	// Named relative to the working directory, as --state-dir may be.
	t.Chdir(filepath.Dir(home))
	own := []snapshot.OwnDir{{Path: filepath.Join(filepath.Base(home), "state"), What: "the state directory"}}

	// Through a symlink to the home directory: compared resolved.
	link := filepath.Join(t.TempDir(), "home")
	must(t, os.Symlink(home, link))
	res, err := Capture(t.Context(), r, link, Options{Workspace: "w", Own: own})
	if err != nil || res.Manifest == nil || !res.Manifest.Complete {
		t.Fatalf("capture of a directory holding the repository: %+v, %v", res.Manifest, err)
	}
	idxRel, err := filepath.Rel(home, filepath.Dir(r.Index().Path()))
	must(t, err)
	want := []snapshot.OwnDir{{Path: ".local/repo", What: "the repository"}, {Path: idxRel, What: "the repository's index cache"}, {Path: "state", What: "the state directory"}}
	if !slices.Equal(res.LeftOut, want) {
		t.Fatalf("left out %+v, want %+v", res.LeftOut, want)
	}
	var paths []string
	must(t, snapshot.Walk(t.Context(), r, res.Manifest.Root.Subtree, "", func(p string, _ *snapshot.Node) error {
		paths = append(paths, p)
		return nil
	}))
	for _, p := range paths {
		for _, d := range want {
			if p == d.Path || len(p) > len(d.Path) && p[:len(d.Path)+1] == d.Path+"/" {
				t.Fatalf("the snapshot holds %s, inside %s (%s)", p, d.What, d.Path)
			}
		}
	}
	for _, p := range []string{"notes.txt", "src/main.go", ".local", ".cache"} {
		if !slices.Contains(paths, p) {
			t.Fatalf("the snapshot lacks %s: %v", p, paths)
		}
	}

	for _, dir := range []string{repoDir, filepath.Join(repoDir, "data"), stateDir} {
		res, err := Capture(t.Context(), r, dir, Options{Workspace: "w2", Own: own})
		if !errors.Is(err, ErrCaptureOverlaps) || res.Manifest != nil {
			t.Fatalf("capture of %s: %v", dir, err)
		}
	}
	if n := countSnapshots(t, r, "w2"); n != 0 {
		t.Fatalf("refused captures wrote %d snapshots", n)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
