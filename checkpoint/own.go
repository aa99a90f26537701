package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"lifeboat/snapshot"
)

// ErrCaptureOverlaps: the captured directory is, or is inside, a
// directory Lifeboat keeps its own data in (the repository, its cache).
// Nothing was captured.
var ErrCaptureOverlaps = errors.New("capture refused")

// ownInside returns the directories of own that lie inside root, by their
// slash paths from root, symlinks resolved on both sides, and not inside
// another of them; a root that is
// one of them, or inside one, is ErrCaptureOverlaps. Paths that do not
// resolve (an object store's location, a directory not made yet) are
// passed over.
func ownInside(root string, own []snapshot.OwnDir) ([]snapshot.OwnDir, error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, nil // the capture itself says what is wrong with root
	}
	var inside []snapshot.OwnDir
	for _, d := range own {
		if d.Path == "" {
			continue
		}
		abs, err := filepath.Abs(d.Path) // a relative --cache-dir or --state-dir
		if err != nil {
			continue
		}
		p, err := filepath.EvalSymlinks(abs)
		if err != nil {
			continue
		}
		if up, err := filepath.Rel(p, real); err == nil && up != ".." && !strings.HasPrefix(up, "../") {
			how := "is inside"
			if up == "." {
				how = "is"
			}
			return nil, fmt.Errorf("%w: %s %s %s %s: a capture would read Lifeboat's own files while it writes them; capture the workspace's directory",
				ErrCaptureOverlaps, root, how, d.What, d.Path)
		}
		if rel, err := filepath.Rel(real, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			inside = append(inside, snapshot.OwnDir{Path: filepath.ToSlash(rel), What: d.What})
		}
	}
	// One inside another (the index cache in the cache directory) goes
	// with it.
	var out []snapshot.OwnDir
	for _, d := range inside {
		if !slices.ContainsFunc(inside, func(o snapshot.OwnDir) bool { return strings.HasPrefix(d.Path, o.Path+"/") }) {
			out = append(out, d)
		}
	}
	return out, nil
}
