package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"lifeboat/blob"
)

// rsEntry is one entry to restore. Entries are kept in depth-first name
// order (the order a walk of the snapshot visits them); entry 0 is the
// snapshot's root, restored as the target directory itself.
type rsEntry struct {
	node   *Node
	path   string // slash path from the root; "" for the root
	name   string // validated: a single component
	parent int32  // the parent directory's entry; -1 for the root
	depth  int32
	link   int32 // hard links: the file entry it names
	file   int32 // regular files: index into rsPlan.files; -1 otherwise
}

// rsFile is a regular file to write and its state while restoring.
type rsFile struct {
	entry int32
	size  int64
	uses  int // chunk placements (a chunk may sit at several offsets)

	mu      sync.Mutex
	fd      int // -1 when not open
	created bool
	holes   bool // a run of zeros was left as a hole
	active  int  // writers holding fd
	left    int  // placements not yet written
}

// rsPlan is everything a restore will do, decided before the first write.
type rsPlan struct {
	entries  []rsEntry
	files    []*rsFile
	chunks   map[blob.ID]*rsChunk
	skipped  []string // sockets and devices: recorded, never created
	maxDepth int32
	bytes    uint64
	dirs     uint64
	others   uint64 // symlinks, hard links, FIFOs
}

// rsPlanner walks a snapshot's trees and builds the plan. Every node is
// checked (safeCheckNode) before it gets an entry, so a refused entry is
// found before anything is written.
type rsPlanner struct {
	ctx    context.Context
	l      BlobLoader
	tier   blob.Tier
	root   *Node
	incs   [][]string
	inced  []bool
	plan   *rsPlan
	seen   uint64           // nodes visited, the root included
	limit  uint64           // most nodes the manifest declares; 0 = no totals to hold it to
	files  map[string]int32 // path -> entry of every regular file planned so far
	onPath map[blob.ID]bool // tree blobs of the directories being walked (cycle check)
	comps  []string         // names of the current directory's path
	load   rsTreeLoader     // the walk's: loadNow or an rsTrees's
}

// rsTreeLoader returns tree id decoded; a decoding error is an *rsBadTree.
type rsTreeLoader func(ctx context.Context, id blob.ID) (*Tree, error)

// loadNow loads tree id on the calling goroutine.
func (p *rsPlanner) loadNow(ctx context.Context, id blob.ID) (*Tree, error) {
	t, _, err := rsLoadTree(ctx, p.l, p.tier, id)
	return t, err
}

// rsPlanTree builds the plan of a restore of m, limited to includes.
func rsPlanTree(ctx context.Context, l BlobLoader, tier blob.Tier, m *Manifest, includes []string) (*rsPlan, error) {
	if m.Root.Type != TypeDir {
		return nil, &RestoreError{Paths: []string{""}, Err: fmt.Errorf("%w: snapshot root is a %s, not a directory", ErrUnsafeEntry, m.Root.Type)}
	}
	if err := safeCheckFields("", &m.Root); err != nil {
		return nil, err
	}
	p := &rsPlanner{ctx: ctx, l: l, tier: tier, root: &m.Root, plan: &rsPlan{chunks: map[blob.ID]*rsChunk{}},
		files: map[string]int32{}, onPath: map[blob.ID]bool{}, seen: 1, limit: m.Totals.Files + m.Totals.Dirs}
	all := true
	for _, inc := range includes {
		comps, err := safeSplitInclude(inc)
		if err != nil {
			return nil, err
		}
		if len(comps) == 0 { // "/" or "." is the whole snapshot
			continue
		}
		all = false
		p.incs = append(p.incs, comps)
	}
	if all {
		p.incs = nil
	}
	p.inced = make([]bool, len(p.incs))
	p.load = p.loadNow
	if all { // with includes, most trees loaded ahead might not be wanted
		trees := newRsTrees(ctx, l, tier)
		defer trees.stop()
		p.load = trees.load
	}
	p.plan.entries = append(p.plan.entries, rsEntry{node: &m.Root, parent: -1, link: -1, file: -1})
	p.plan.dirs++
	if err := p.walkDir(0, m.Root.Subtree, all); err != nil {
		return nil, err
	}
	for i, ok := range p.inced {
		if !ok {
			return nil, fmt.Errorf("include %q is not in snapshot %s (list it with `lifeboat ls`)", includes[i], m.ID.Short())
		}
	}
	return p.plan, nil
}

// walkDir plans the entries of directory dir (entry index), whose listing
// is subtree. all: every entry below is included.
func (p *rsPlanner) walkDir(dir int32, subtree []blob.ID, all bool) error {
	dirPath := p.plan.entries[dir].path
	for _, id := range subtree {
		if p.onPath[id] {
			return &RestoreError{Paths: []string{dirPath}, Err: fmt.Errorf("%w: directory lists tree %s, which is one of its own ancestors (a cycle)", ErrUnsafeEntry, id.Short())}
		}
	}
	for _, id := range subtree {
		p.onPath[id] = true
	}
	defer func() {
		for _, id := range subtree {
			delete(p.onPath, id)
		}
	}()
	return rsLoadDir(p.ctx, p.load, dirPath, subtree, func(n *Node) error {
		return p.visit(dir, n, all)
	})
}

// visit plans one node of directory dir.
func (p *rsPlanner) visit(dir int32, n *Node, all bool) error {
	parent := &p.plan.entries[dir]
	name := string(n.Name)
	path := safeJoin(parent.path, name)
	// Identical directories share one tree blob, so trees form a DAG; a
	// damaged or forged snapshot could list a subtree so many times that
	// planning it would exhaust memory. A capture counts every node it
	// records, so more nodes than the manifest declares means damage.
	if p.seen++; p.limit > 0 && p.seen > p.limit {
		return &RestoreError{Paths: []string{path}, Err: fmt.Errorf("%w: the snapshot's trees list more than the %d entries its manifest declares (repeated subtrees: a damaged or forged snapshot); run `lifeboat check`", ErrUnsafeEntry, p.limit)}
	}
	if err := safeCheckNode(path, n); err != nil {
		return err
	}
	inside := all
	if p.incs != nil { // also below an include, to see nested includes match
		p.comps = append(p.comps[:parent.depth], name)
		ancestor := false
		for i, inc := range p.incs {
			if len(p.comps) > len(inc) || !slices.Equal(inc[:len(p.comps)], p.comps) {
				continue
			}
			if len(p.comps) == len(inc) {
				inside, p.inced[i] = true, true
			} else {
				ancestor = true
			}
		}
		if !inside && (!ancestor || n.Type != TypeDir) {
			return nil
		}
	}
	idx := int32(len(p.plan.entries))
	e := rsEntry{node: n, path: path, name: name, parent: dir, depth: parent.depth + 1, link: -1, file: -1}
	p.plan.maxDepth = max(p.plan.maxDepth, e.depth)
	switch n.Type {
	case TypeSocket, TypeDevice:
		p.plan.skipped = append(p.plan.skipped, path)
		return nil
	case TypeHardlink:
		target, copyOf, err := p.resolveLink(path, n)
		if err != nil {
			return err
		}
		if copyOf == nil {
			e.link = target
			p.plan.others++
			break
		}
		// With includes, the file it names is not restored: this name
		// gets a copy of that file.
		c := *copyOf
		c.Name = n.Name
		e.node = &c
		fallthrough
	case TypeFile:
		e.file = int32(len(p.plan.files))
		p.plan.files = append(p.plan.files, &rsFile{entry: idx, size: int64(e.node.Size), fd: -1})
		p.plan.bytes += e.node.Size
		if n.Type == TypeFile { // a copy made for a hard link is no link target
			p.files[path] = idx
		}
	case TypeDir:
		p.plan.dirs++
	default:
		p.plan.others++
	}
	p.plan.entries = append(p.plan.entries, e)
	if n.Type == TypeDir {
		return p.walkDir(idx, n.Subtree, inside)
	}
	return nil
}

// resolveLink finds the file a hard link names: an earlier regular file of
// the snapshot, by its path from the root. It returns the file's entry, or
// (with includes, when that file is not restored) its node to copy.
func (p *rsPlanner) resolveLink(path string, n *Node) (int32, *Node, error) {
	refuse := func(format string, a ...any) (int32, *Node, error) {
		return -1, nil, &RestoreError{Paths: []string{path}, Err: fmt.Errorf("%w: hard link: "+format, append([]any{ErrUnsafeEntry}, a...)...)}
	}
	comps, err := safeSplitLinkPath(n.LinkPath)
	if err != nil {
		return refuse("%v", err)
	}
	if idx, ok := p.files[strings.Join(comps, "/")]; ok {
		return idx, nil, nil
	}
	if p.incs == nil || safeComparePaths(comps, strings.Split(path, "/")) >= 0 {
		return refuse("%q is not an earlier regular file of the snapshot", n.LinkPath)
	}
	t, err := p.lookup(comps)
	if err != nil {
		return -1, nil, err
	}
	if t == nil || t.Type != TypeFile {
		return refuse("%q is not an earlier regular file of the snapshot", n.LinkPath)
	}
	return -1, t, nil
}

// lookup finds the node at comps from the root, or nil.
func (p *rsPlanner) lookup(comps []string) (*Node, error) {
	cur, dirPath := p.root, ""
	for _, c := range comps {
		if cur.Type != TypeDir {
			return nil, nil
		}
		var found *Node
		err := rsLoadDir(p.ctx, p.loadNow, dirPath, cur.Subtree, func(n *Node) error {
			if string(n.Name) == c {
				found = n
			}
			return nil
		})
		if err != nil || found == nil {
			return nil, err
		}
		if err := safeCheckNode(safeJoin(dirPath, c), found); err != nil {
			return nil, err
		}
		cur, dirPath = found, safeJoin(dirPath, c)
	}
	return cur, nil
}

// rsLoadDir is LoadDir with errors that name the directory: a listing
// that does not load is a RestoreError with the repository's cause, one
// that does not decode or validate is an ErrUnsafeEntry.
func rsLoadDir(ctx context.Context, load rsTreeLoader, dirPath string, subtree []blob.ID, fn func(*Node) error) error {
	var last []byte
	for _, id := range subtree {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := load(ctx, id)
		if bad := (*rsBadTree)(nil); errors.As(err, &bad) {
			return &RestoreError{Paths: []string{dirPath}, Err: fmt.Errorf("%w: directory listing (tree %s): %v", ErrUnsafeEntry, id.Short(), bad.err)}
		}
		if err != nil {
			return &RestoreError{Paths: []string{dirPath}, Err: fmt.Errorf("directory listing (tree %s): %w", id.Short(), err)}
		}
		for i := range t.Nodes {
			n := &t.Nodes[i]
			if last != nil && bytes.Compare(last, n.Name) >= 0 {
				return &RestoreError{Paths: []string{dirPath}, Err: fmt.Errorf("%w: directory listing (tree %s): entries not sorted or duplicated at %q", ErrUnsafeEntry, id.Short(), n.Name)}
			}
			last = n.Name
			if err := fn(n); err != nil {
				return err
			}
		}
	}
	return nil
}
