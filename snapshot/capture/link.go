package capture

import (
	"fmt"
	"sync"

	"lifeboat/snapshot"
)

// capInode identifies a file with several names.
type capInode struct{ dev, ino uint64 }

// capLink is the first captured name of a file with several names. Later
// names become hard link nodes pointing at it; since its content is read
// asynchronously, they wait for the outcome: if the first name could not
// be read, they are left out too (restore could not make them).
type capLink struct {
	dir  *capDir
	name string

	mu      sync.Mutex
	state   int // 0 pending, 1 captured, 2 left out
	path    []byte
	waiters []capLinkWaiter
}

type capLinkWaiter struct {
	part *capPart
	i    int
}

const (
	capLinkPending = iota
	capLinkOK
	capLinkFailed
)

// hardlink makes part.nodes[i] (already stat'ed) a later name of first.
func (c *capturer) hardlink(d *capDir, part *capPart, i int, first *capLink) {
	n := &part.nodes[i]
	n.Type = snapshot.TypeHardlink
	first.mu.Lock()
	defer first.mu.Unlock()
	if first.path == nil {
		first.path = first.dir.relPath(first.name)
	}
	n.LinkPath = first.path
	switch first.state {
	case capLinkPending:
		part.pending.Add(1)
		first.waiters = append(first.waiters, capLinkWaiter{part, i})
		return
	case capLinkFailed:
		c.omit(d, string(n.Name), n, fmt.Errorf("hard link to %s, which could not be captured", snapshot.EscapePath(first.path)))
		return
	}
	c.files.Add(1)
	c.o.Progress.Done(1, 0)
}

// resolve records the first name's outcome and releases the waiters.
func (l *capLink) resolve(c *capturer, ok bool) {
	l.mu.Lock()
	l.state = capLinkFailed
	if ok {
		l.state = capLinkOK
	}
	ws := l.waiters
	l.waiters = nil
	l.mu.Unlock()
	for _, w := range ws {
		if ok {
			c.files.Add(1)
			c.o.Progress.Done(1, 0)
		} else {
			n := &w.part.nodes[w.i]
			c.omit(w.part.dir, string(n.Name), n, fmt.Errorf("hard link to %s, which could not be captured", snapshot.EscapePath(l.path)))
		}
		c.partDone(w.part)
	}
}
