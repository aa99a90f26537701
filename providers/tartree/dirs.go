package tartree

import (
	"archive/tar"
	"os"
	"sort"
	"time"

	"lifeboat/internal/osutil"
)

// Dirs holds the metadata of the directories a tar stream writes, to be
// given to them once all their entries are in place: writing an entry
// moves a directory's mtime, and a read-only directory could not take it.
type Dirs struct{ list []dirMeta }

type dirMeta struct {
	rel      string
	mode     os.FileMode
	mtime    time.Time
	uid, gid int
}

// Add records the metadata header h gives the directory rel.
func (d *Dirs) Add(rel string, h *tar.Header) {
	d.list = append(d.list, dirMeta{rel: rel, mode: osutil.FileMode(uint32(h.Mode)), mtime: h.ModTime, uid: h.Uid, gid: h.Gid})
}

// Apply gives each directory recorded in dst, deepest first (so setting a
// child's mtime never moves its parent's), its owner when owners, its
// permission bits and its mtime. It stops at the first failure and
// returns it with the directory it failed on.
func (d *Dirs) Apply(dst *os.Root, owners bool) (rel string, err error) {
	sort.SliceStable(d.list, func(i, j int) bool { return Depth(d.list[i].rel) > Depth(d.list[j].rel) })
	for _, m := range d.list {
		if owners {
			if err := dst.Lchown(m.rel, m.uid, m.gid); err != nil {
				return m.rel, err
			}
		}
		if err := dst.Chmod(m.rel, m.mode); err != nil {
			return m.rel, err
		}
		if err := dst.Chtimes(m.rel, m.mtime, m.mtime); err != nil {
			return m.rel, err
		}
	}
	return "", nil
}
