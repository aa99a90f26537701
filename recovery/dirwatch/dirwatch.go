// Package dirwatch tells whether anything in a directory tree changed
// since the last walk of it, from the kernel's inotify events, so that a
// server's periodic round over an unchanged workspace need not stat every
// file to find it unchanged.
//
// A Tree is watched by its walks: Mark starts one, WatchDir adds each
// directory before the walk lists it (and WatchFile each file with more
// than one link), Done ends it. Changed then reports whether the kernel
// reported an event in the tree since Mark. A linked file's stat, taken
// before its watch, is taken again after, and a difference is reported
// with Invalidate; the root's stat is for the caller to compare (no watch
// above the root reports a change to it).
//
// Invariants:
//   - Changed never misses an event the kernel queued before it was
//     called: it reads the queue itself, under the lock every reader of
//     the queue holds. An event is queued before the system call that
//     caused it returns.
//   - Anything the watcher cannot vouch for reads as changed: a tree not
//     yet walked; a walk that watched no root; a directory or file that
//     could not be watched (the per-user watch limit, or the half of it
//     a Watcher takes at most, leaving the rest to the user's other
//     programs; /proc not mounted; a directory the walk could not list:
//     Fail); a directory on a file system where a change may come from
//     elsewhere (anything but a local disk file system: NFS, FUSE, 9p and
//     others) or on another file system than the tree's root; a queue
//     overflow; a failed read of the queue; a closed Watcher.
//   - What inotify cannot see, and the caller must bound by walking again
//     anyway: writes through a shared memory mapping (no event until the
//     writer closes the file) and Linux native AIO writes (io_submit); a
//     hard link made from outside the tree to a file that had one link,
//     and every change through it; a file system mounted over a watched
//     directory after the walk; a ZFS rollback or receive; writes through
//     a handle with no path (open_by_handle_at, the kernel NFS server).
//   - One inotify instance per Watcher, whatever the number of trees; a
//     directory watched by two trees is one kernel watch.
package dirwatch

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// events are the changes a tree's watches report: every change to an
// entry's content, metadata or name, and a file opened for writing being
// closed (the end of most writes through a memory mapping).
const events = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_MOVED_FROM | unix.IN_MOVED_TO

// ErrNotLocal is a Tree's error when a directory is on a file system whose
// changes inotify may not see.
var ErrNotLocal = errors.New("not on a local disk file system: changes made elsewhere raise no event")

// Watcher is one inotify instance shared by any number of Trees. Its
// methods and its Trees' are safe for concurrent use.
type Watcher struct {
	f    *os.File
	done chan struct{}

	mu     sync.Mutex
	fd     int
	closed bool
	err    error                    // the queue could not be read: every tree is changed
	limit  int                      // the most watches this Watcher places; 0: no cap of its own
	wds    map[int32]map[*Tree]bool // kernel watch -> the trees holding it
	trees  map[*Tree]bool           // every open tree
	buf    [16 << 10]byte           // read buffer of drain
}

// New starts a Watcher. It fails where inotify is not available (or the
// per-user limit of instances is reached).
func New() (*Watcher, error) {
	fd, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK) })
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &Watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, done: make(chan struct{}),
		wds: map[int32]map[*Tree]bool{}, trees: map[*Tree]bool{}}
	// The per-user limit is shared with every other program of the user
	// (editors, file managers, other servers): this one takes at most half.
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 1 {
			w.limit = n / 2
		}
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		w.f.Close()
		return nil, fmt.Errorf("inotify: %w", err)
	}
	// The queue is read as events arrive, so that it does not overflow
	// between two rounds; Changed reads it too.
	go func() {
		defer close(w.done)
		_ = rc.Read(func(uintptr) bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.drain()
			return w.closed || w.err != nil
		})
	}()
	return w, nil
}

// Close stops the Watcher and removes its watches; its trees read as
// changed from then on.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.f.Close() // wakes the reader
	<-w.done
	return err
}

// drain reads every queued event. Called with w.mu held.
func (w *Watcher) drain() {
	for !w.closed && w.err == nil {
		n, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.Read(w.fd, w.buf[:]) })
		if err == unix.EAGAIN {
			return
		}
		if err != nil || n <= 0 {
			w.err = fmt.Errorf("reading inotify events: %v", err)
			return
		}
		w.apply(w.buf[:n])
	}
}

// apply marks the trees the events in b (whole events) touch as changed.
func (w *Watcher) apply(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		b = b[min(len(b), unix.SizeofInotifyEvent+int(ev.Len)):]
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			for t := range w.trees {
				t.changed = true
			}
		case ev.Mask&unix.IN_IGNORED != 0:
			// The watch is gone (its directory was deleted, which its
			// parent's watch reported, or it was removed here).
			for t := range w.wds[ev.Wd] {
				delete(t.wds, ev.Wd)
			}
			delete(w.wds, ev.Wd)
		default:
			for t := range w.wds[ev.Wd] {
				t.changed = true
			}
		}
	}
}

// Tree returns a new tree to watch; it reads as changed until a walk of
// it is done.
func (w *Watcher) Tree() *Tree {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := &Tree{w: w, changed: true, wds: map[int32]bool{}}
	w.trees[t] = true
	return t
}

// Tree is one directory tree's watches.
type Tree struct {
	w *Watcher
	// Under w.mu:
	changed bool           // an event since Mark, or no walk done
	err     error          // why this walk's tree cannot be vouched for
	walking bool           // between Mark and Done
	dev     uint64         // the root's device, in a walk
	wds     map[int32]bool // the watches this tree holds; true: added in this walk
	closed  bool
}

// Mark starts a walk: from here on, an event in a watched directory
// marks the tree changed. The caller walks the tree after Mark, calling
// Watch for each directory before listing it, then Done; walks of one
// tree must not overlap.
func (t *Tree) Mark() {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain() // events from before the walk are the walk's to see
	t.changed, t.err, t.walking, t.dev = false, nil, true, 0
	for wd := range t.wds {
		t.wds[wd] = false
	}
}

// WatchDir watches the directory open as fd, st being its stat, for
// changes to its entries. The first directory of a walk is its root.
func (t *Tree) WatchDir(fd int, st *unix.Stat_t) error {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if !t.walking {
		return t.fail(errors.New("the tree is not being walked"))
	}
	if t.dev == 0 {
		var sfs unix.Statfs_t
		if err := osutil.IgnoringEINTR(func() error { return unix.Fstatfs(fd, &sfs) }); err != nil {
			return t.fail(fmt.Errorf("statfs: %w", err))
		}
		if !localFS[uint32(sfs.Type)] {
			return t.fail(ErrNotLocal)
		}
		t.dev = st.Dev
	} else if st.Dev != t.dev {
		return t.fail(fmt.Errorf("another file system is mounted inside the tree: %w", ErrNotLocal))
	}
	// The descriptor's link in /proc is followed to the very directory
	// that is open, whatever happened to its path since.
	return t.add("/proc/self/fd/"+strconv.Itoa(fd), events|unix.IN_ONLYDIR)
}

// WatchFile watches the file at path, not following a symlink, for
// changes made through any of its links. A walk calls it for a regular
// file with more than one link: a change through a link outside the tree
// raises no event in the tree's directories.
func (t *Tree) WatchFile(path string) error {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	return t.add(path, unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_CLOSE_WRITE|unix.IN_DONT_FOLLOW)
}

// add adds a watch for path with mask. Called with w.mu held.
func (t *Tree) add(path string, mask uint32) error {
	w := t.w
	if t.closed || w.closed {
		return t.fail(errors.New("the watcher is closed"))
	}
	if w.limit > 0 && len(w.wds) >= w.limit {
		return t.fail(fmt.Errorf("inotify watch: this server's share of the per-user limit is used: %d watches, half of sysctl fs.inotify.max_user_watches", w.limit))
	}
	wd, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.InotifyAddWatch(w.fd, path, mask) })
	if err != nil {
		if err == unix.ENOSPC {
			err = errors.New("the per-user limit of inotify watches is reached (sysctl fs.inotify.max_user_watches)")
		}
		return t.fail(fmt.Errorf("inotify watch: %w", err))
	}
	id := int32(wd)
	t.wds[id] = true
	if w.wds[id] == nil {
		w.wds[id] = map[*Tree]bool{}
	}
	w.wds[id][t] = true
	return nil
}

// fail records why the walk's tree cannot be vouched for. Called with
// w.mu held.
func (t *Tree) fail(err error) error {
	if t.err == nil {
		t.err = err
	}
	return t.err
}

// Invalidate says the walk saw its tree change where no watch was in place
// yet to report it: the tree reads as changed until the next walk.
func (t *Tree) Invalidate() {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	t.changed = true
}

// Fail says the walk could not watch part of its tree (a directory it
// could not list): Done returns err, and the tree reads as changed.
func (t *Tree) Fail(err error) {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	t.fail(err)
}

// Done ends a walk: the watches of directories the walk did not reach
// (moved out of the tree) are removed, and all of them when the walk
// failed to watch some directory. It returns the walk's watch error, if
// any: the tree then reads as changed until a walk without one.
func (t *Tree) Done() error {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	t.walking = false
	if t.dev == 0 && t.err == nil {
		t.err = errors.New("the walk watched no root directory")
	}
	for wd, added := range t.wds {
		if !added || t.err != nil {
			t.release(wd)
		}
	}
	return t.err
}

// release gives up this tree's hold of watch wd, removing the watch when
// no other tree holds it. Called with w.mu held.
func (t *Tree) release(wd int32) {
	w := t.w
	delete(t.wds, wd)
	delete(w.wds[wd], t)
	if len(w.wds[wd]) == 0 {
		delete(w.wds, wd)
		if !w.closed {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
		}
	}
}

// Changed reports whether the tree may have changed since the last walk's
// Mark: an event in it, or anything that keeps the watcher from vouching
// for it (see the package's invariants).
func (t *Tree) Changed() bool {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain()
	return t.changed || t.err != nil || t.walking || t.closed || w.closed || w.err != nil
}

// Close removes the tree's watches.
func (t *Tree) Close() {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd := range t.wds {
		t.release(wd)
	}
	t.closed = true
	delete(w.trees, t)
}

// Err is why the Watcher stopped reading its queue, if it did: every tree
// reads as changed from then on.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Watches is the number of kernel watches the Watcher holds.
func (w *Watcher) Watches() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.wds)
}

// localFS are the file systems whose every change goes through this
// kernel, by f_type (statfs(2)): ext2/3/4, XFS, Btrfs, tmpfs, F2FS, ZFS,
// overlayfs (the changes made through it), bcachefs.
var localFS = map[uint32]bool{
	0xEF53: true, 0x58465342: true, 0x9123683E: true, 0x01021994: true,
	0xF2F52010: true, 0x2FC12FC1: true, 0x794C7630: true, 0xCA451A4E: true,
}
