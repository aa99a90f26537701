package capture

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/internal/osutil"

	"lifeboat/snapshot"
)

// The walker runs in the goroutine that called Run: it lists one directory at a time
// (all its names, then the descriptor stays open only while needed), stats
// each entry relative to the directory's descriptor, descends into
// subdirectories depth first in name order, and hands regular files to
// the readers. Everything is done with *at calls on descriptors, so path
// length never matters.

// capMaxHeld bounds the directory descriptors the walker keeps open along
// the current path. Deeper down, the shallowest are closed, and reopened
// through ".." (checked by device and inode) on the way back up.
const capMaxHeld = 64

// capHandle is a directory descriptor shared by the walker and the readers
// of the directory's files; it is closed when the last user releases it.
type capHandle struct {
	fd   int
	refs atomic.Int32
}

func newCapHandle(fd int) *capHandle {
	h := &capHandle{fd: fd}
	h.refs.Store(1)
	return h
}

func (h *capHandle) acquire() { h.refs.Add(1) }

func (h *capHandle) release() {
	if h.refs.Add(-1) == 0 {
		_ = unix.Close(h.fd)
	}
}

// capDir is a directory being captured.
type capDir struct {
	parent   *capDir
	name     string // as the OS gave it
	part     *capPart
	node     *snapshot.Node // in parent part's nodes, or the manifest's root
	dev, ino uint64
	depth    int     // the root is 0
	key      blob.ID // file cache key
	h        *capHandle
	broken   bool // moved during the walk: the rest of it is skipped

	fineTimes bool // on a local filesystem with nanosecond timestamps (capFineTimes)

	ids     []blob.ID    // tree blob per part; zero for an empty part
	pending atomic.Int64 // parts not saved, +1 while the walker lists
}

// relPath is the slash path of entry name in d (d itself when name is
// empty) from the root, as raw bytes.
func (d *capDir) relPath(name string) []byte {
	var parts []string
	if name != "" {
		parts = append(parts, name)
	}
	for x := d; x.parent != nil; x = x.parent {
		parts = append(parts, x.name)
	}
	var b []byte
	for i := len(parts) - 1; i >= 0; i-- {
		b = append(b, parts[i]...)
		if i > 0 {
			b = append(b, '/')
		}
	}
	return b
}

// errPath is relPath for messages: "." for the root, invalid UTF-8 escaped.
func (d *capDir) errPath(name string) string {
	p := d.relPath(name)
	if len(p) == 0 {
		return "."
	}
	return snapshot.EscapePath(p)
}

// walk captures the entries of d, listed in l. It returns only fatal
// errors.
func (c *capturer) walk(d *capDir, l capListing) error {
	if l.err != nil {
		if d.parent == nil {
			return fmt.Errorf("capture %s: listing: %w", c.rootPath, l.err)
		}
		c.record(d.errPath(""), fmt.Errorf("listing the directory: %w", l.err))
		d.node.Type = "" // left out
	}
	names := l.names
	nparts := (len(names) + snapshot.MaxNodesPerBlob - 1) / snapshot.MaxNodesPerBlob
	d.ids = make([]blob.ID, nparts)
	d.pending.Store(int64(nparts) + 1)
	for p := range nparts {
		chunk := names[p*snapshot.MaxNodesPerBlob : min(len(names), (p+1)*snapshot.MaxNodesPerBlob)]
		prep, ahead := l.first, l.ahead
		if p > 0 {
			prep, ahead = c.prepare(d, p, chunk), nil
		}
		if ahead == nil {
			ahead = &capAheadPart{}
		}
		l.first, l.ahead = capPrep{}, nil
		if err := c.walkPart(d, p, chunk, prep, ahead); err != nil {
			return err
		}
	}
	c.dirDone(d)
	return nil
}

// walkPart captures names, part p of d, stat'ed in prep, queuing its
// subdirectories to list ahead (ahead: those queued so far).
func (c *capturer) walkPart(d *capDir, p int, names []string, prep capPrep, ahead *capAheadPart) error {
	part := &capPart{dir: d, idx: p, nodes: capNodes.get(len(names))}
	if c.o.Cache != nil {
		part.cache, part.old = prep.hits, prep.old // a hit stays the entry of its file
	}
	part.pending.Store(1)
	for i, name := range names {
		part.nodes[i].Name = capNameBytes(name)
		if prep.errs[i] != nil {
			c.omit(d, name, &part.nodes[i], capVanished(prep.errs[i]))
		}
	}
	for i, name := range names {
		// Queue only entries ahead of this one: the walker does this one
		// itself, and one it has passed would never be taken.
		if ahead.next = max(ahead.next, i+1); ahead.next < len(names) {
			c.queueAhead(ahead, d, names, prep.sts)
		}
		err := c.ctx.Err()
		if err == nil {
			f := capFile{st: &prep.sts[i], ahead: ahead.task(i)}
			if prep.hits != nil {
				f.hit = prep.hits[i]
			}
			err = c.entry(d, part, i, name, f)
		} else {
			err = c.fatal()
		}
		if err != nil {
			c.dropAhead(ahead)
			return err
		}
		if ahead.tasks != nil {
			c.drop(ahead.tasks[i]) // when not descended into
			ahead.tasks[i] = nil
		}
		names[i] = "" // let the name go
	}
	capStats.put(prep.sts) // the part's entries are all past the walker
	return c.walkerPartDone(part)
}

// prepare stats names, part p of d, and, with a file cache, finds the
// cache entries that can stand in for reading them in the part's record.
// It records nothing, so it is safe off the walker's goroutine.
func (c *capturer) prepare(d *capDir, p int, names []string) capPrep {
	prep := capPrep{sts: capStats.get(len(names)), errs: make([]error, len(names))}
	if c.o.Cache != nil {
		prep.hits = make([]*capEntry, len(names))
	}
	if d.broken {
		return prep
	}
	fd := d.h.fd
	var cname []byte // capFstatat's buffer
	for i, name := range names {
		st := &prep.sts[i]
		if err := osutil.IgnoringEINTR(func() (err error) { cname, err = capFstatat(fd, name, st, cname); return err }); err != nil {
			*st = unix.Stat_t{}
			prep.errs[i] = err
		}
	}
	if c.o.Cache != nil {
		prep.old = c.cacheLookup(d, p, names, prep.sts, prep.hits)
	}
	return prep
}

// capFile is what the walker knows of an entry before capturing it.
type capFile struct {
	st  *unix.Stat_t // mode 0: could not be stat'ed (already recorded)
	hit *capEntry    // its file cache entry, when it can be used

	ahead *capAhead // a directory queued for listing ahead
}

// entry captures name in d, stat'ed into f.st, as part.nodes[i].
func (c *capturer) entry(d *capDir, part *capPart, i int, name string, f capFile) error {
	n := &part.nodes[i]
	st := f.st
	if d.broken || st.Mode == 0 {
		n.Type = ""
		return nil
	}
	fd := d.h.fd
	c.setMeta(n, st)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return c.descend(d, part, n, name, f.ahead)
	case unix.S_IFREG:
		return c.file(d, part, i, name, f)
	case unix.S_IFLNK:
		target, err := capReadlink(fd, name)
		if err != nil {
			c.omit(d, name, n, capVanished(err))
			return nil
		}
		n.Type, n.LinkTarget = snapshot.TypeSymlink, target
	case unix.S_IFIFO:
		n.Type = snapshot.TypeFIFO
	case unix.S_IFSOCK:
		n.Type = snapshot.TypeSocket
	case unix.S_IFCHR, unix.S_IFBLK:
		n.Type = snapshot.TypeDevice
	default:
		c.omit(d, name, n, fmt.Errorf("unknown file type %#o", st.Mode&unix.S_IFMT))
		return nil
	}
	c.files.Add(1)
	c.o.Progress.Done(1, 0)
	return nil
}

// omit leaves n out of the snapshot and records why.
func (c *capturer) omit(d *capDir, name string, n *snapshot.Node, err error) {
	n.Type = ""
	c.record(d.errPath(name), err)
}

// capVanished says plainly that an entry went away during the capture.
func capVanished(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return errors.New("vanished during the capture")
	}
	return err
}

// descend opens subdirectory name of d (or takes it as listed ahead in
// a) and walks it.
func (c *capturer) descend(d *capDir, part *capPart, n *snapshot.Node, name string, a *capAhead) error {
	n.Type = snapshot.TypeDir
	if a == nil {
		a = newCapAhead(d, name, c)
	}
	c.take(a)
	err := a.err
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			err = errors.New("replaced by a non-directory during the capture")
		}
		c.omit(d, name, n, capVanished(err))
		return nil
	}
	child := a.child
	c.setMeta(n, &a.st) // the directory opened, should it differ from the one stat'ed
	if c.onStack[capInode{child.dev, child.ino}] {
		c.closeOpened(a)
		c.omit(d, name, n, errors.New("the same directory as one of its parents (a bind mount?); not descending"))
		return nil
	}
	l := a.list
	a.list = capListing{}
	if l.later { // read once already: list it again from the start
		if _, err := unix.Seek(child.h.fd, 0, io.SeekStart); err != nil {
			l = capListing{err: err}
		} else {
			l = c.list(child, 0)
		}
	}
	if l.sensitive != "" {
		c.closeOpened(a)
		n.Type = "" // not in the workspace tree: captured after the walk
		return c.discovered(d, name, l.sensitive)
	}
	child.part, child.node = part, n
	if n.Xattrs, err = a.xattrs, a.xattrEr; err != nil {
		c.record(child.errPath(""), err)
	}
	part.pending.Add(1)
	c.push(child)
	err = c.walk(child, l)
	c.pop(child)
	if n.Type == snapshot.TypeDir {
		c.dirs.Add(1)
	}
	return err
}

// push makes child the current directory, closing the walker's
// descriptor of the shallowest held directory when too many are held.
func (c *capturer) push(child *capDir) {
	c.stack = append(c.stack, child)
	c.onStack[capInode{child.dev, child.ino}] = true
	if len(c.stack)-c.heldFrom > capMaxHeld {
		if ev := c.stack[c.heldFrom]; ev.h != nil {
			ev.h.release()
			ev.h = nil
		}
		c.heldFrom++
	}
}

// pop leaves child, the current directory, for its parent, reopening the
// parent's descriptor if push closed it.
func (c *capturer) pop(child *capDir) {
	c.stack = c.stack[:len(c.stack)-1]
	delete(c.onStack, capInode{child.dev, child.ino})
	parent := child.parent
	if parent.h == nil && !parent.broken {
		if fd, err := c.reopen(parent, child); err != nil {
			parent.broken = true
			c.record(parent.errPath(""), fmt.Errorf("moved during the capture; entries after %q are left out: %w", snapshot.EscapePath([]byte(child.name)), err))
		} else {
			parent.h = newCapHandle(fd)
		}
	}
	if child.h != nil {
		child.h.release()
		child.h = nil
	}
	c.heldFrom = min(c.heldFrom, len(c.stack)-1)
}

// reopen opens d again, through ".." from its child when it can, else by
// names from the root, and checks it is the same directory.
func (c *capturer) reopen(d, child *capDir) (int, error) {
	if child.h != nil {
		if fd, err := capOpenat(child.h.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY); err == nil {
			if capSameDir(fd, d) {
				return fd, nil
			}
			_ = unix.Close(fd)
		}
	}
	var names []string
	for x := d; x.parent != nil; x = x.parent {
		names = append(names, x.name)
	}
	fd, err := capOpenat(unix.AT_FDCWD, c.rootPath, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		nfd, err := capOpenat(fd, names[i], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		_ = unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = nfd
	}
	if !capSameDir(fd, d) {
		_ = unix.Close(fd)
		return -1, errors.New("another directory now has its name")
	}
	return fd, nil
}

func capSameDir(fd int, d *capDir) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Dev == d.dev && st.Ino == d.ino
}

// file captures regular file name of d as part.nodes[i]: a hard link when
// an earlier name of the same inode was captured, else its cache entry's
// chunks, else a job for the readers (or nothing to read when empty).
func (c *capturer) file(d *capDir, part *capPart, i int, name string, f capFile) error {
	n, st := &part.nodes[i], f.st
	n.Type = snapshot.TypeFile
	n.Size = uint64(st.Size)
	var link *capLink
	if st.Nlink > 1 {
		ino := capInode{st.Dev, st.Ino}
		if first := c.links[ino]; first != nil {
			c.hardlink(d, part, i, first)
			return nil
		}
		// A copy: name shares its block with the whole listing
		// (capParseNames), which c.links would keep to the end.
		link = &capLink{dir: d, name: strings.Clone(name)}
		c.links[ino] = link
	}
	c.files.Add(1)
	if st.Size == 0 {
		// Nothing to read; an empty file is not worth a cache entry.
		var err error
		if n.Xattrs, err = capXattrsAt(d.h.fd, name); err != nil {
			c.record(d.errPath(name), err)
		}
		if link != nil {
			link.resolve(c, true)
		}
		c.o.Progress.Done(1, 0)
		return nil
	}
	if f.hit != nil {
		c.cached(d, part, i, n, name, f)
		if link != nil {
			link.resolve(c, true)
		}
		return nil
	}
	j := &capJob{part: part, i: i, dir: d, h: d.h, name: name, link: link, st: *st}
	part.pending.Add(1)
	d.h.acquire()
	select {
	case c.jobs <- j:
		return nil
	case <-c.ctx.Done():
		d.h.release()
		return c.fatal()
	}
}
