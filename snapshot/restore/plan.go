package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"lifeboat/blob"
	"lifeboat/repo"

	"lifeboat/snapshot"
)

// rsEntry is one entry to restore. Entries are kept in depth-first name
// order (the order a walk of the snapshot visits them); entry 0 is the
// snapshot's root, restored as the target directory itself.
type rsEntry struct {
	node   *snapshot.Node
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
	holes   bool  // a run of zeros was left as a hole
	active  int32 // writers holding fd
	left    int   // placements not yet written
	placed  int64 // bytes of the placements written (or left as holes)
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
	others   uint64  // symlinks, hard links, FIFOs
	expanded rsCount // what planning expanded, against Limits
}

// rsPlanner walks a snapshot's trees and builds the plan. Every node is
// checked (safeCheckNode) before it gets an entry, so a refused entry is
// found before anything is written.
type rsPlanner struct {
	ctx    context.Context
	l      snapshot.BlobLoader
	tier   blob.Tier
	root   *snapshot.Node
	incs   [][]string
	inced  []bool
	plan   *rsPlan
	count  rsCount              // what the walk expanded: nodes visited (the root included) and their bytes
	bounds rsBounds             // what it may expand
	files  map[string]int32     // path -> entry of every regular file planned so far
	onPath map[blob.ID]bool     // tree blobs of the directories being walked (cycle check)
	comps  []string             // names of the current directory's path
	ahead  *snapshot.TreesAhead // loads the walk's trees ahead of it
}

// rsTreeLoader returns tree id decoded; a decoding error is a
// *snapshot.BadTreeError.
type rsTreeLoader func(ctx context.Context, id blob.ID) (*snapshot.Tree, error)

// loadNow loads tree id on the calling goroutine.
func (p *rsPlanner) loadNow(ctx context.Context, id blob.ID) (*snapshot.Tree, error) {
	return snapshot.LoadTree(ctx, p.l, p.tier, id)
}

// rsAhead bounds the trees loaded ahead of the plan's walk (a variable for
// tests).
var rsAhead = snapshot.DefaultAheadBounds

// rsPlanTree builds the plan of a restore of m, limited to includes.
func rsPlanTree(ctx context.Context, l snapshot.BlobLoader, tier blob.Tier, m *snapshot.Manifest, includes []string) (*rsPlan, error) {
	if m.Root.Type != snapshot.TypeDir {
		return nil, &Error{Paths: []string{""}, Err: fmt.Errorf("%w: snapshot root is a %s, not a directory", snapshot.ErrUnsafeEntry, m.Root.Type)}
	}
	if err := safeCheckFields(&m.Root); err != nil {
		return nil, &Error{Paths: []string{""}, Err: err}
	}
	p := &rsPlanner{ctx: ctx, l: l, tier: tier, root: &m.Root, plan: &rsPlan{chunks: map[blob.ID]*rsChunk{}},
		files: map[string]int32{}, onPath: map[blob.ID]bool{}, bounds: newRsBounds(ctx, m)}
	if err := p.count.add(&p.bounds, "", &m.Root); err != nil {
		return nil, err
	}
	all := true
	for _, inc := range includes {
		comps, err := snapshot.SplitPath(inc)
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
		// The whole tree is planned: a manifest that declares more than
		// the limits allow is refused before anything is expanded.
		if err := p.bounds.declaredFits(); err != nil {
			return nil, err
		}
	}
	p.inced = make([]bool, len(p.incs))
	// With includes, walkDir keeps the directories it does not enter out
	// of the look-ahead.
	p.ahead = snapshot.NewTreesAhead(ctx, l, tier, rsAhead, nil)
	defer p.ahead.Stop()
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
	p.plan.expanded = p.count
	return p.plan, nil
}

// walkDir plans the entries of directory dir (entry index), whose listing
// is subtree. all: every entry below is included.
func (p *rsPlanner) walkDir(dir int32, subtree []blob.ID, all bool) error {
	dirPath := p.plan.entries[dir].path
	for _, id := range subtree {
		if p.onPath[id] {
			return &Error{Paths: []string{dirPath}, Err: fmt.Errorf("%w: directory lists tree %s, which is one of its own ancestors (a cycle)", snapshot.ErrUnsafeEntry, id.Short())}
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
	load := p.ahead.Load
	if !all && p.incs != nil {
		// Only the subdirectories an include names, is inside of or
		// leads to are entered.
		depth := p.plan.entries[dir].depth
		comps := slices.Clone(p.comps[:depth])
		keep := func(n *snapshot.Node) bool {
			comps = append(comps[:depth], string(n.Name))
			inside, ancestor := p.match(comps, false)
			return inside || ancestor
		}
		load = func(ctx context.Context, id blob.ID) (*snapshot.Tree, error) {
			return p.ahead.LoadKeep(ctx, id, keep)
		}
	}
	return rsLoadDir(p.ctx, load, dirPath, subtree, func(n *snapshot.Node) error {
		return p.visit(dir, n, all)
	})
}

// match reports whether the entry at comps is one an include names
// (inside) and whether it leads to one (ancestor); with mark, it marks
// the includes that name it as found.
func (p *rsPlanner) match(comps []string, mark bool) (inside, ancestor bool) {
	for i, inc := range p.incs {
		if len(comps) > len(inc) || !slices.Equal(inc[:len(comps)], comps) {
			continue
		}
		if len(comps) == len(inc) {
			inside = true
			if mark {
				p.inced[i] = true
			}
		} else {
			ancestor = true
		}
	}
	return inside, ancestor
}

// visit plans one node of directory dir.
func (p *rsPlanner) visit(dir int32, n *snapshot.Node, all bool) error {
	parent := &p.plan.entries[dir]
	name := string(n.Name)
	path := snapshot.JoinPath(parent.path, name)
	// Identical directories share one tree blob, so trees form a DAG; a
	// damaged or forged snapshot could list a subtree so many times that
	// planning it would exhaust memory. Every node is counted, with the
	// bytes the plan holds for it, before it is kept (rsCount.add).
	if err := p.count.add(&p.bounds, path, n); err != nil {
		return err
	}
	if err := safeCheckNode(n); err != nil {
		return &Error{Paths: []string{path}, Err: err}
	}
	inside := all
	if p.incs != nil { // also below an include, to see nested includes match
		p.comps = append(p.comps[:parent.depth], name)
		named, ancestor := p.match(p.comps, true)
		inside = inside || named
		if !inside && (!ancestor || n.Type != snapshot.TypeDir) {
			return nil // walkDir's keep left such a directory out of the look-ahead
		}
	}
	idx := int32(len(p.plan.entries))
	e := rsEntry{node: n, path: path, name: name, parent: dir, depth: parent.depth + 1, link: -1, file: -1}
	p.plan.maxDepth = max(p.plan.maxDepth, e.depth)
	switch n.Type {
	case snapshot.TypeSocket, snapshot.TypeDevice:
		p.plan.skipped = append(p.plan.skipped, path)
		return nil
	case snapshot.TypeHardlink:
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
		if err := p.count.addCopy(&p.bounds, path, copyOf); err != nil {
			return err
		}
		c := *copyOf
		c.Name = n.Name
		e.node = &c
		fallthrough
	case snapshot.TypeFile:
		e.file = int32(len(p.plan.files))
		p.plan.files = append(p.plan.files, &rsFile{entry: idx, size: int64(e.node.Size), fd: -1})
		p.plan.bytes += e.node.Size
		if n.Type == snapshot.TypeFile { // a copy made for a hard link is no link target
			p.files[path] = idx
		}
	case snapshot.TypeDir:
		p.plan.dirs++
	default:
		p.plan.others++
	}
	p.plan.entries = append(p.plan.entries, e)
	if n.Type == snapshot.TypeDir {
		return p.walkDir(idx, n.Subtree, inside)
	}
	return nil
}

// resolveLink finds the file a hard link names: an earlier regular file of
// the snapshot, by its path from the root. It returns the file's entry, or
// (with includes, when that file is not restored) its node to copy.
func (p *rsPlanner) resolveLink(path string, n *snapshot.Node) (int32, *snapshot.Node, error) {
	refuse := func(format string, a ...any) (int32, *snapshot.Node, error) {
		return -1, nil, &Error{Paths: []string{path}, Err: fmt.Errorf("%w: hard link: "+format, append([]any{snapshot.ErrUnsafeEntry}, a...)...)}
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
	if t == nil || t.Type != snapshot.TypeFile {
		return refuse("%q is not an earlier regular file of the snapshot", n.LinkPath)
	}
	return -1, t, nil
}

// lookup finds the node at comps from the root, or nil.
func (p *rsPlanner) lookup(comps []string) (*snapshot.Node, error) {
	cur, dirPath := p.root, ""
	for _, c := range comps {
		if cur.Type != snapshot.TypeDir {
			return nil, nil
		}
		var found *snapshot.Node
		err := rsLoadDir(p.ctx, p.loadNow, dirPath, cur.Subtree, func(n *snapshot.Node) error {
			if string(n.Name) == c {
				found = n
			}
			return nil
		})
		if err != nil || found == nil {
			return nil, err
		}
		if err := safeCheckNode(found); err != nil {
			return nil, &Error{Paths: []string{snapshot.JoinPath(dirPath, c)}, Err: err}
		}
		cur, dirPath = found, snapshot.JoinPath(dirPath, c)
	}
	return cur, nil
}

// rsLoadDir is LoadDir with errors that name the directory: a listing
// that does not load is an Error with the repository's cause, one
// that does not decode or validate is an ErrUnsafeEntry.
func rsLoadDir(ctx context.Context, load rsTreeLoader, dirPath string, subtree []blob.ID, fn func(*snapshot.Node) error) error {
	var last []byte
	for _, id := range subtree {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := load(ctx, id)
		if bad := (*snapshot.BadTreeError)(nil); errors.As(err, &bad) {
			return &Error{Paths: []string{dirPath}, Err: fmt.Errorf("%w: directory listing (tree %s): %v", snapshot.ErrUnsafeEntry, id.Short(), bad.Err)}
		}
		if err != nil {
			return &Error{Paths: []string{dirPath}, Err: fmt.Errorf("directory listing (tree %s): %w", id.Short(), err)}
		}
		for i := range t.Nodes {
			n := &t.Nodes[i]
			if last != nil && bytes.Compare(last, n.Name) >= 0 {
				return &Error{Paths: []string{dirPath}, Err: fmt.Errorf("%w: directory listing (tree %s): entries not sorted or duplicated at %q", snapshot.ErrUnsafeEntry, id.Short(), n.Name)}
			}
			last = n.Name
			if err := fn(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// Limits bound what a restore's plan expands and holds in memory,
// whatever the snapshot's manifest declares. The plan keeps every entry
// of the snapshot until the restore ends, and identical directories share
// one tree blob, so a forged snapshot that lists one subtree many times
// (recursively) expands to far more entries than it stores. The planner
// counts what it has actually expanded and refuses the restore as soon as
// a bound is passed. A zero field takes the default's value.
type Limits struct {
	// Entries is the most entries the plan expands: every node of every
	// directory listing it reads, the snapshot's root included.
	Entries uint64
	// Bytes is the most bytes the plan is counted to hold for them: per
	// entry its decoded node and plan record, its name (twice) and path,
	// user and group, link target or path, extended attributes, subtree
	// ids, each chunk reference with its placement and lookup record, and
	// a regular file's own record (rsNodeBytes). The tests check that this
	// count is not below the heap the plan of a real snapshot holds.
	Bytes uint64
}

// DefaultLimits: 2,000,000 entries and 2 GiB. A snapshot of small
// files, each with its own chunk, is counted at about 750 bytes per entry,
// so the entry limit is reached first. WithLimits changes them for
// one restore (the CLI's --max-entries and --max-plan-mib).
var DefaultLimits = Limits{Entries: 2_000_000, Bytes: 2 << 30}

type rsLimitsKey struct{}

// WithLimits returns a context under which Run plans with
// limits l (zero fields: DefaultLimits) instead of the defaults.
func WithLimits(ctx context.Context, l Limits) context.Context {
	return context.WithValue(ctx, rsLimitsKey{}, l)
}

// restoreLimits returns the limits ctx carries, with defaults filled in.
func restoreLimits(ctx context.Context) Limits {
	l, _ := ctx.Value(rsLimitsKey{}).(Limits)
	if l.Entries == 0 {
		l.Entries = DefaultLimits.Entries
	}
	if l.Bytes == 0 {
		l.Bytes = DefaultLimits.Bytes
	}
	return l
}

// rsBounds is what one plan may expand: the limits, and the entries its
// manifest declares (a capture counts every node it records, so a tree
// that lists more is damaged or forged).
type rsBounds struct {
	limits   Limits
	declared uint64 // files + dirs of the manifest's totals; 0: none declared
	snapshot blob.ID
}

func newRsBounds(ctx context.Context, m *snapshot.Manifest) rsBounds {
	declared := m.Totals.Files + m.Totals.Dirs
	if declared < m.Totals.Files { // forged totals that overflow
		declared = ^uint64(0)
	}
	return rsBounds{limits: restoreLimits(ctx), declared: declared, snapshot: m.ID}
}

// declaredFits refuses a manifest that declares more entries than the
// limit allows, before anything is expanded.
func (b *rsBounds) declaredFits() error {
	if b.declared <= b.limits.Entries {
		return nil
	}
	return &PlanLimitError{Snapshot: b.snapshot, Declared: b.declared, Limits: b.limits, Limit: "entries"}
}

// rsCount is what a plan has expanded so far.
type rsCount struct {
	entries uint64
	bytes   uint64
}

// add counts node n at path and refuses when a bound is passed.
func (c *rsCount) add(b *rsBounds, path string, n *snapshot.Node) error {
	c.entries++
	c.bytes += rsNodeBytes(path, n)
	return c.check(b, path)
}

// addCopy counts the copy of file node n a hard link at path gets.
func (c *rsCount) addCopy(b *rsBounds, path string, n *snapshot.Node) error {
	c.bytes += rsNodeBytes("", n)
	return c.check(b, path)
}

func (c *rsCount) check(b *rsBounds, path string) error {
	var limit string
	switch {
	case b.declared > 0 && c.entries > b.declared:
		limit = "declared"
	case c.entries > b.limits.Entries:
		limit = "entries"
	case c.bytes > b.limits.Bytes:
		limit = "bytes"
	default:
		return nil
	}
	return &Error{Paths: []string{path}, Err: &PlanLimitError{Snapshot: b.snapshot, Declared: b.declared, Limits: b.limits,
		Limit: limit, Entries: c.entries, Bytes: c.bytes}}
}

// What the plan is counted to hold per entry, beyond the variable-length
// fields: the decoded node and the plan's record of it; a regular file's
// record, its pointer and its entry in the planner's path map (at twice
// its size: a map's slack); per chunk reference, the id in the node, its
// placement, and (if distinct) its rsChunk, map entry and lookup id; per
// extended attribute, its record.
const (
	rsEntryCost    = uint64(unsafe.Sizeof(snapshot.Node{}) + unsafe.Sizeof(rsEntry{}))
	rsFileCost     = uint64(unsafe.Sizeof(rsFile{}) + 8 + 2*(16+8))
	rsChunkRefCost = uint64(blob.IDSize + unsafe.Sizeof(rsUse{}) + unsafe.Sizeof(rsChunk{}) + 8 + 2*(blob.IDSize+8) + blob.IDSize + 4)
	rsXattrCost    = uint64(unsafe.Sizeof(snapshot.Xattr{}))
)

// rsNodeBytes is what the plan is counted to hold for node n at path.
func rsNodeBytes(path string, n *snapshot.Node) uint64 {
	b := rsEntryCost + uint64(len(path)) + 2*uint64(len(n.Name)) + uint64(len(n.User)+len(n.Group)+len(n.LinkTarget)+len(n.LinkPath))
	b += uint64(len(n.Subtree))*blob.IDSize + uint64(len(n.Content))*rsChunkRefCost
	for _, x := range n.Xattrs {
		b += rsXattrCost + uint64(len(x.Name)+len(x.Value))
	}
	if n.Type == snapshot.TypeFile || n.Type == snapshot.TypeHardlink {
		b += rsFileCost
	}
	return b
}

// PlanLimitError is a restore refused while planning, before anything is
// written, because the snapshot's trees expand past a bound: more entries
// than its manifest declares (Limit "declared"), or more entries or bytes
// than Limits allow ("entries", "bytes"). It matches repo.ErrCorrupt
// (the snapshot is damaged or forged; exit code 13) and ErrUnsafeEntry
// (the recovery lifecycle does not retry it), unless the snapshot is
// really that large, which the message says how to allow.
type PlanLimitError struct {
	Snapshot blob.ID // zero for a tree that is not a snapshot's own (a graft)
	Declared uint64  // entries the manifest declares (files + dirs); 0: none
	Limits   Limits
	Limit    string // the bound passed: "declared", "entries" or "bytes"
	Entries  uint64 // entries expanded when the plan stopped, the root included (0: refused before expanding)
	Bytes    uint64 // the bytes counted for them
}

func (e *PlanLimitError) Error() string {
	var b strings.Builder
	b.WriteString("restore refused while planning: ")
	if !e.Snapshot.IsNull() {
		fmt.Fprintf(&b, "snapshot %s ", e.Snapshot.Short())
	} else {
		b.WriteString("the tree ")
	}
	raise := "--max-entries"
	switch e.Limit {
	case "declared":
		fmt.Fprintf(&b, "lists more than the %d entries its manifest declares (repeated subtrees): it is damaged or forged; run `lifeboat check` and restore another snapshot", e.Declared)
		return b.String()
	case "entries":
		if e.Entries == 0 {
			fmt.Fprintf(&b, "declares %d entries, more than restore's limit of %d", e.Declared, e.Limits.Entries)
		} else {
			fmt.Fprintf(&b, "lists more than %d entries, restore's limit", e.Limits.Entries)
			if e.Declared > 0 {
				fmt.Fprintf(&b, " (its manifest declares %d)", e.Declared)
			}
		}
	default:
		fmt.Fprintf(&b, "needs more than %s of memory to plan (%d entries expanded so far), restore's limit", snapshot.HumanBytes(e.Limits.Bytes), e.Entries)
		raise = "--max-plan-mib"
	}
	fmt.Fprintf(&b, ": it is damaged or forged (run `lifeboat check`), or larger than this restore allows (if it is genuine, raise the limit with %s or restore it in parts with --include)", raise)
	return b.String()
}

// Is makes a PlanLimitError match repo.ErrCorrupt and ErrUnsafeEntry.
func (e *PlanLimitError) Is(target error) bool {
	return target == repo.ErrCorrupt || target == snapshot.ErrUnsafeEntry
}
