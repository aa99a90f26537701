package ssh

import (
	"io/fs"

	"lifeboat/providers/tartree"
)

type inodeKey struct{ dev, ino uint64 }

func permBits(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// pathOf is the path a walk error names, relative to the walked tree.
func pathOf(err error, rel string) string { return tartree.PathOf(err, rel) }
