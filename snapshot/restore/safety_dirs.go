package restore

import (
	"container/list"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// safeDirs hands out file descriptors for the directories of a staging
// tree. Each is opened relative to its parent's descriptor with one
// validated name and O_NOFOLLOW|O_DIRECTORY, starting from the staging
// directory's own descriptor; so no path from a manifest ever reaches the
// kernel as more than one name, no symlink is ever followed, and nothing
// can resolve outside the staging directory. This is the openat walk that
// os.Root does per call, done once per directory: os.Root re-walks every
// component on each call, which is quadratic in a tree 10,000 levels deep,
// and it lacks mknodat, fsetxattr and utimensat(AT_SYMLINK_NOFOLLOW).
//
// Descriptors are cached (at most max idle ones stay open) and reference
// counted; get and put are safe for concurrent use.
type safeDirs struct {
	rootFD int                                         // the staging directory; owned by the caller
	parent func(dir int32) (parent int32, name string) // dir 0 is the root
	max    int

	mu   sync.Mutex
	open map[int32]*safeDirFD
	idle list.List // of *safeDirFD with refs == 0, most recently used first
}

type safeDirFD struct {
	dir  int32
	fd   int
	refs int
	elem *list.Element // in idle when refs == 0
}

func newSafeDirs(rootFD int, parent func(int32) (int32, string), max int) *safeDirs {
	return &safeDirs{rootFD: rootFD, parent: parent, max: max, open: map[int32]*safeDirFD{}}
}

// get returns a descriptor for directory dir; call put(dir) when done.
func (d *safeDirs) get(dir int32) (int, error) {
	if dir == 0 {
		return d.rootFD, nil
	}
	d.mu.Lock()
	if e, ok := d.open[dir]; ok {
		d.ref(e)
		d.mu.Unlock()
		return e.fd, nil
	}
	d.mu.Unlock()
	p, name := d.parent(dir)
	pfd, err := d.get(p)
	if err != nil {
		return -1, err
	}
	fd, err := safeOpenAt(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	d.put(p)
	if err != nil {
		return -1, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.open[dir]; ok { // another goroutine opened it meanwhile
		_ = unix.Close(fd)
		d.ref(e)
		return e.fd, nil
	}
	d.open[dir] = &safeDirFD{dir: dir, fd: fd, refs: 1}
	d.evict()
	return fd, nil
}

// ref takes a reference on e. d.mu held.
func (d *safeDirs) ref(e *safeDirFD) {
	if e.refs == 0 {
		d.idle.Remove(e.elem)
		e.elem = nil
	}
	e.refs++
}

// put releases a descriptor from get.
func (d *safeDirs) put(dir int32) {
	if dir == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.open[dir]
	e.refs--
	if e.refs == 0 {
		e.elem = d.idle.PushFront(e)
		d.evict()
	}
}

// evict closes idle descriptors beyond max. d.mu held.
func (d *safeDirs) evict() {
	for d.idle.Len() > d.max {
		e := d.idle.Remove(d.idle.Back()).(*safeDirFD)
		delete(d.open, e.dir)
		_ = unix.Close(e.fd)
	}
}

// close closes every cached descriptor; none may be in use.
func (d *safeDirs) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for dir, e := range d.open {
		_ = unix.Close(e.fd)
		delete(d.open, dir)
	}
	d.idle.Init()
}

// safeOpenAt opens one name in directory dirfd without following a
// symlink there. name must be a single validated component.
func safeOpenAt(dirfd int, name string, flags int, mode uint32) (int, error) {
	fd, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode) })
	if err != nil {
		return -1, fmt.Errorf("openat %q: %w", name, err)
	}
	return fd, nil
}
