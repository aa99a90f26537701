package profile

import (
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// The search goes depth first in name order, from directory descriptor
// to directory descriptor (openat with O_NOFOLLOW), so no symlink is
// followed and path length never matters.

// maxHeld bounds the directory descriptors the search keeps open along
// the current path. Deeper down, the shallowest (but the root) are
// closed, and reopened through ".." on the way back up.
const maxHeld = 64

type dirID struct{ dev, ino uint64 }

// searchDir is a directory on the current path of the search.
type searchDir struct {
	parent *searchDir
	name   string // as the OS gave it; "" for the root
	fd     int    // -1 while closed
	id     dirID
}

type searcher struct {
	abs      string // the workspace root as given (made absolute)
	buf      []byte // getdents buffer, shared: a directory is listed before any below it
	stack    []*searchDir
	heldFrom int // stack[heldFrom:] and the root hold descriptors
	onStack  map[dirID]bool
	found    []Profile
}

// search looks for profiles in subdirectories subdirs of d, in name order.
func (s *searcher) search(d *searchDir, subdirs []string) {
	slices.Sort(subdirs)
	for i, name := range subdirs {
		if d.fd < 0 {
			return // moved away while searched below: passed over
		}
		s.visit(d, name)
		subdirs[i] = "" // let the name go
	}
}

// visit opens subdirectory name of d and records it if it is a profile,
// else searches it. A directory that cannot be opened is passed over.
func (s *searcher) visit(d *searchDir, name string) {
	fd, readable, err := openDir(d.fd, name)
	if err != nil {
		return
	}
	c := &searchDir{parent: d, name: name, fd: fd}
	defer closeDir(c)
	var ok bool
	if c.id, ok = statDir(fd); !ok || s.onStack[c.id] {
		return // the same as one of its parents (a bind mount): not searched again
	}
	var l listing
	if readable {
		l, _ = list(fd, s.buf) // an error leaves l incomplete: what was read is still searched
	}
	if k, ok := detect(fd, &l); ok {
		rel := c.rel()
		s.found = append(s.found, Profile{Dir: filepath.Join(s.abs, rel), Rel: rel, Kind: k})
		return
	}
	s.push(c)
	s.search(c, l.subdirs)
	s.pop(c)
}

// rel is d's slash path from the root.
func (d *searchDir) rel() string {
	var names []string
	for x := d; x.parent != nil; x = x.parent {
		names = append(names, x.name)
	}
	slices.Reverse(names)
	return strings.Join(names, "/")
}

// push makes c the current directory, closing the descriptor of the
// shallowest held directory (never the root's) when too many are held.
func (s *searcher) push(c *searchDir) {
	s.stack = append(s.stack, c)
	s.onStack[c.id] = true
	if len(s.stack)-s.heldFrom > maxHeld {
		closeDir(s.stack[s.heldFrom])
		s.heldFrom++
	}
}

// pop leaves c, the current directory, for its parent, reopening the
// parent's descriptor if push closed it.
func (s *searcher) pop(c *searchDir) {
	s.stack = s.stack[:len(s.stack)-1]
	delete(s.onStack, c.id)
	if p := c.parent; p.fd < 0 {
		p.fd = reopenParent(c)
	}
	s.heldFrom = max(1, min(s.heldFrom, len(s.stack)-1))
}

// reopenParent opens c's parent again through "..", checked by device and
// inode; -1 when c was moved away from it (the parent's remaining
// subdirectories are then passed over, as moved ones would be).
func reopenParent(c *searchDir) int {
	if c.fd < 0 {
		return -1
	}
	fd, err := openat(c.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1
	}
	if id, ok := statDir(fd); !ok || id != c.parent.id {
		_ = unix.Close(fd)
		return -1
	}
	return fd
}

// openDir opens directory name in dirfd, never through a symlink. A
// directory that may be searched but not read gets an O_PATH descriptor,
// enough to look its markers up by name, and readable false.
func openDir(dirfd int, name string) (fd int, readable bool, err error) {
	const flags = unix.O_DIRECTORY | unix.O_NOFOLLOW
	fd, err = openat(dirfd, name, unix.O_RDONLY|flags)
	if err == unix.EACCES {
		fd, err = openat(dirfd, name, unix.O_PATH|flags)
		return fd, false, err
	}
	return fd, err == nil, err
}

func openat(dirfd int, name string, flags int) (fd int, err error) {
	err = osutil.IgnoringEINTR(func() error { fd, err = unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, 0); return err })
	return fd, err
}

// statDir returns the device and inode of the directory open as fd.
func statDir(fd int) (dirID, bool) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return dirID{}, false
	}
	return dirID{uint64(st.Dev), st.Ino}, true
}

func closeDir(d *searchDir) {
	if d.fd >= 0 {
		_ = unix.Close(d.fd)
		d.fd = -1
	}
}
