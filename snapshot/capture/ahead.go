package capture

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"lifeboat/snapshot"
)

// Listing ahead. In a tree that did not change, the walker's own system
// calls (open, list and stat every directory) and file cache lookups are
// nearly all of a capture, and they ran on one goroutine. Now, once the
// walker has stat'ed a part, the part's subdirectories are queued for
// capAhead workers, which open each one, list it and stat and look up its
// first part, so that the walker finds the work done when it descends.
//
// Everything the walker decides stays with the walker, in the same order
// as without the workers: which entries are left out and which errors are
// recorded, hard links, the bind-mount check, trees. The workers only
// gather: a directory listed ahead is listed a little earlier, nothing
// else. A queued directory the walker reaches first it lists itself.

// capAheadMax bounds the directories listed ahead and not yet walked
// (each holds a descriptor), capAheadNames the entries of each, and
// capAheadEntries the entries of them all (a few MiB: names, stats and
// cache entries): a larger directory, or one that would go over the
// total, is opened ahead but listed by the walker, so memory stays
// bounded however wide the tree. (With 1,024 entries at most and no
// total, the walker listed and stat'ed every source directory of the
// bench corpus itself, about a quarter of its entries, while the workers
// waited.)
const capAheadMax = 64

// (Variables so that tests can use small directories.)
var (
	capAheadNames         = snapshot.MaxNodesPerBlob
	capAheadEntries int64 = 16384
)

// capAheadWindow is how many subdirectories of one part are queued ahead
// of the walker at a time: a few per level keeps the workers on the
// walker's path, depth first, rather than across a wide directory.
const capAheadWindow = 4

// capListing is a directory's entries as the walker uses them: names
// filtered and sorted, and the first part (or all the directory when it
// has one) stat'ed.
type capListing struct {
	names []string
	err   error // listing failed; names is empty
	first capPrep
	later bool          // too large to list ahead: the walker lists it
	ahead *capAheadPart // first's subdirectories queued so far, or nil
	held  int           // entries counted in capAheadQueue.entries until the walker takes it
	// sensitive is the kind Discover detected the directory as; then
	// names and first are empty: it is captured into the sensitive tier.
	sensitive string
}

// capPrep is a part's entries stat'ed and, with a file cache, their file
// keys and the cache entries that can stand in for reading them.
type capPrep struct {
	sts  []unix.Stat_t // mode 0: the stat failed (errs) or was skipped
	errs []error       // per entry, nil when stat'ed
	hits []*capEntry   // file cache entries that stand in for reading (with a cache)
	old  capOld        // what the lookup found of the part's record
}

// capAhead is a subdirectory to open and list, ahead of the walker or by
// it.
type capAhead struct {
	taken    atomic.Bool   // by a worker or the walker; the other one waits
	queued   *capAheadPart // holds a slot and a place in its part's window until taken or dropped
	resolved bool          // taken or dropped (walker-only)
	done     chan struct{}
	h        *capHandle // the parent's, held until the open
	child    *capDir    // parent, name, depth and key set; dev, ino, h by open

	st      unix.Stat_t
	err     error // opening or stat'ing the directory failed
	xattrs  []snapshot.Xattr
	xattrEr error
	list    capListing
}

func newCapAhead(d *capDir, name string, c *capturer) *capAhead {
	a := &capAhead{done: make(chan struct{}), h: d.h,
		// A copy of name: it shares its block with the whole listing
		// (capParseNames), which a directory a hard link names, and its
		// children, would keep to the end of the capture.
		child: &capDir{parent: d, name: strings.Clone(name), depth: d.depth + 1, fineTimes: d.fineTimes}}
	d.h.acquire()
	if c.o.Cache != nil {
		a.child.key = capChildKey(c.keys, d.key, name)
	}
	return a
}

// open opens, lists and prepares a's directory, once: the caller must
// have taken a. A directory of more than limit entries (> 0) is left for
// later. It closes done.
func (a *capAhead) open(c *capturer, limit int) {
	defer close(a.done)
	defer a.h.release()
	d := a.child
	cfd, err := capOpenat(a.h.fd, d.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		a.err = err
		return
	}
	if err := unix.Fstat(cfd, &a.st); err != nil {
		_ = unix.Close(cfd)
		a.err = err
		return
	}
	d.dev, d.ino, d.h = a.st.Dev, a.st.Ino, newCapHandle(cfd)
	if d.dev != d.parent.dev { // a mount point
		d.fineTimes = capFineTimes(cfd)
	}
	a.xattrs, a.xattrEr = capXattrsFd(cfd)
	a.list = c.list(d, limit)
	if !a.list.later && a.list.err == nil && a.list.sensitive == "" {
		a.list.ahead = &capAheadPart{}
		c.queueAhead(a.list.ahead, d, a.list.names[:len(a.list.first.sts)], a.list.first.sts)
	}
}

// take returns a, open, for the walker to descend into: opened here, and
// listed whole, when no worker has taken it.
func (c *capturer) take(a *capAhead) {
	if a.taken.CompareAndSwap(false, true) {
		a.open(c, 0)
	} else {
		<-a.done
	}
	c.unqueue(a)
}

// unqueue marks a taken or dropped: its slot, window place and the
// entries it held go back.
func (c *capturer) unqueue(a *capAhead) {
	a.resolved = true
	c.ahead.entries.Add(-int64(a.list.held))
	a.list.held = 0
	if a.queued != nil {
		a.queued.inflight--
		a.queued = nil
		<-c.ahead.slots
	}
}

// drop lets go of a, which the walker will not descend into, and of the
// subdirectories queued with it.
func (c *capturer) drop(a *capAhead) {
	if a == nil || a.resolved {
		return
	}
	if a.taken.CompareAndSwap(false, true) {
		a.h.release()
		close(a.done)
	}
	<-a.done
	c.closeOpened(a)
	c.unqueue(a)
}

// closeOpened lets go of what open left in a once nothing will walk it:
// the subdirectories it queued and its descriptor.
func (c *capturer) closeOpened(a *capAhead) {
	c.dropAhead(a.list.ahead)
	if a.child.h != nil {
		a.child.h.release()
		a.child.h = nil
	}
}

// dropAhead drops every task of p (nil: none).
func (c *capturer) dropAhead(p *capAheadPart) {
	if p == nil {
		return
	}
	for _, a := range p.tasks {
		c.drop(a)
	}
}

// list lists d and stats its first part; with limit > 0, a directory of
// more than limit entries is left for later. It is safe off the walker's
// goroutine: it records nothing.
func (c *capturer) list(d *capDir, limit int) capListing {
	names, err := capReadNames(d.h.fd, limit)
	if err != nil {
		return capListing{err: err}
	}
	held := 0
	if limit > 0 {
		if len(names) > limit || !c.ahead.hold(len(names)) {
			return capListing{later: true}
		}
		held = len(names)
	}
	if c.o.Discover != nil && d.parent != nil { // all names, excluded ones too
		if kind, ok := c.o.Discover.Detect(d.h.fd, names); ok {
			return capListing{sensitive: kind, held: held}
		}
	}
	names = c.excl.filter(d, names)
	names = c.filter(d, names)
	slices.Sort(names)
	l := capListing{names: names, first: c.prepare(d, 0, names[:min(len(names), snapshot.MaxNodesPerBlob)]), held: held}
	if c.o.hooks.listed != nil {
		c.o.hooks.listed(d.errPath(""))
	}
	return l
}

// capAheadQueue hands subdirectories to the workers, last queued first:
// the walker queues a part's subdirectories in reverse, so the workers
// follow its depth-first order.
type capAheadQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	tasks  []*capAhead
	closed bool
	slots  chan struct{} // capAheadMax tokens: a task holds one until walked or dropped
	wg     sync.WaitGroup

	entries atomic.Int64 // entries of the directories listed ahead and not yet taken
}

// hold counts n entries listed ahead, if the total stays within
// capAheadEntries.
func (q *capAheadQueue) hold(n int) bool {
	if q.entries.Add(int64(n)) > capAheadEntries {
		q.entries.Add(-int64(n))
		return false
	}
	return true
}

func (c *capturer) startAhead() {
	q := &c.ahead
	q.cond.L = &q.mu
	q.slots = make(chan struct{}, capAheadMax)
	for range min(runtime.GOMAXPROCS(0), 4) {
		q.wg.Go(func() {
			for a := q.next(); a != nil; a = q.next() {
				if a.taken.CompareAndSwap(false, true) {
					a.open(c, capAheadNames)
				}
			}
		})
	}
}

// stopAhead ends the workers; every task must have been waited for or
// dropped.
func (c *capturer) stopAhead() {
	q := &c.ahead
	q.mu.Lock()
	q.closed = true
	q.tasks = nil
	q.mu.Unlock()
	q.cond.Broadcast()
	q.wg.Wait()
}

func (q *capAheadQueue) next() *capAhead {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.tasks) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil
	}
	a := q.tasks[len(q.tasks)-1]
	q.tasks = q.tasks[:len(q.tasks)-1]
	return a
}

// capAheadPart is a part's subdirectories queued so far.
type capAheadPart struct {
	tasks    []*capAhead // by entry, nil when not queued
	next     int         // the entries before it were considered
	inflight int         // tasks queued and not yet taken or dropped
}

// task returns entry i's task, nil when it was not queued.
func (p *capAheadPart) task(i int) *capAhead {
	if p.tasks == nil {
		return nil
	}
	return p.tasks[i]
}

// queueAhead queues the subdirectories among names (entries of d, stat'ed
// in sts) from p.next on, while the window and slots allow; every task
// queued must be taken or dropped.
func (c *capturer) queueAhead(p *capAheadPart, d *capDir, names []string, sts []unix.Stat_t) {
	if d.broken || d.h == nil {
		return
	}
	var queued []*capAhead
names:
	for ; p.next < len(names) && p.inflight < capAheadWindow; p.next++ {
		i := p.next
		if sts[i].Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		select {
		case c.ahead.slots <- struct{}{}:
		default: // out of slots: queued later, or listed by the walker
			break names
		}
		if p.tasks == nil {
			p.tasks = make([]*capAhead, len(names))
		}
		a := newCapAhead(d, names[i], c)
		a.queued = p
		p.inflight++
		p.tasks[i] = a
		queued = append(queued, a)
	}
	if len(queued) == 0 {
		return
	}
	slices.Reverse(queued)
	c.ahead.mu.Lock()
	c.ahead.tasks = append(c.ahead.tasks, queued...)
	c.ahead.mu.Unlock()
	c.ahead.cond.Broadcast()
}
