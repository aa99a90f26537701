package snapshot

import (
	"path/filepath"

	"lifeboat/repo"
)

// OwnDir is a directory Lifeboat keeps its own data in: a restore target
// must neither be inside nor contain one, and a capture leaves one that
// lies inside the captured directory out.
type OwnDir struct {
	Path string `json:"path"`
	What string `json:"what"` // what it is, for messages: "the cache directory", ...
}

// OwnDirs are the directories of r's own data, the repository's directory
// (when it is local) and its index cache, followed by extra.
func OwnDirs(r *repo.Repository, extra []OwnDir) []OwnDir {
	own := []OwnDir{{r.Backend().Location(), "the repository"}}
	if idx := r.Index(); idx != nil {
		own = append(own, OwnDir{filepath.Dir(idx.Path()), "the repository's index cache"})
	}
	return append(own, extra...)
}
