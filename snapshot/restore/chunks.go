package restore

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"lifeboat/blob"
	"lifeboat/repo"

	"lifeboat/snapshot"
)

// rsChunk is one distinct chunk the restore needs and every place it goes.
type rsChunk struct {
	id   blob.ID
	loc  repo.Location
	uses []rsUse
}

// rsUse places a chunk in a file at an offset.
type rsUse struct {
	file int32
	off  int64
}

// rsRun is a contiguous byte range of one pack holding needed chunks
// (with small gaps of unneeded blobs between them), read in one Load.
type rsRun struct {
	pack       blob.ID
	start, end int64
	chunks     []*rsChunk // by offset
	first      int32      // lowest file index served, for ordering
}

// Run shaping: a gap of up to rsMaxGap unneeded bytes is read rather than
// starting a new request; a run stops growing at rsMaxRun bytes, which
// with Workers readers bounds the sealed bytes held in memory.
const (
	rsMaxGap = 256 << 10
	rsMaxRun = 4 << 20
)

// rsLocator finds stored blobs: repo.Repository satisfies it.
type rsLocator interface {
	LookupBlobs(t blob.Tier, typ blob.Type, ids []blob.ID, fn func(i int, loc repo.Location, ok bool) error) error
}

// planChunks looks up every chunk of every file, all at once, and checks
// the chunks add up to each file's size. A chunk that is not indexed fails
// the restore, naming every file that needs it.
func (p *rsPlan) planChunks(l rsLocator, tier blob.Tier) error {
	var ids []blob.ID
	var firstUser []int32 // the file that needs ids[i] first
	for fi, f := range p.files {
		for _, id := range p.entries[f.entry].node.Content {
			if _, ok := p.chunks[id]; !ok {
				p.chunks[id] = nil // not found, unless the lookup below finds it
				ids = append(ids, id)
				firstUser = append(firstUser, int32(fi))
			}
		}
	}
	var err error
	if len(ids) > 0 {
		err = l.LookupBlobs(tier, blob.Data, ids, func(i int, loc repo.Location, ok bool) error {
			if !ok {
				return nil
			}
			// A chunk is checked on read against the id of its pack
			// entry, and its bytes are written without being read back:
			// that entry must be the chunk the file names.
			if loc.ID != ids[i] || loc.Type != blob.Data {
				return &Error{Paths: []string{p.entries[p.files[firstUser[i]].entry].path},
					Err: fmt.Errorf("%w: the index gives chunk %s the place of %s blob %s; run `lifeboat repair index`", repo.ErrCorrupt, ids[i].Short(), loc.Type, loc.ID.Short())}
			}
			p.chunks[ids[i]] = &rsChunk{id: ids[i], loc: loc}
			return nil
		})
	}
	if le := (*repo.LookupError)(nil); errors.As(err, &le) {
		return &Error{Paths: []string{p.entries[p.files[firstUser[le.Index]].entry].path}, Err: fmt.Errorf("looking up chunk %s: %w", ids[le.Index].Short(), le.Err)}
	}
	if re := (*Error)(nil); errors.As(err, &re) {
		return err
	}
	if err != nil {
		return fmt.Errorf("looking up the %d chunks to restore in the local index: %w", len(ids), err)
	}
	missing := map[blob.ID][]string{}
	for fi, f := range p.files {
		e := &p.entries[f.entry]
		var off int64
		broken := false
		for _, id := range e.node.Content {
			c := p.chunks[id]
			if c == nil {
				if paths := missing[id]; len(paths) == 0 || paths[len(paths)-1] != e.path {
					missing[id] = append(paths, e.path)
				}
				broken = true
				continue
			}
			c.uses = append(c.uses, rsUse{file: int32(fi), off: off})
			off += int64(c.loc.PlainLen)
		}
		if broken {
			continue
		}
		if off != f.size {
			return &Error{Paths: []string{e.path}, Err: fmt.Errorf("%w: file size is %d but its chunks hold %d bytes", snapshot.ErrUnsafeEntry, f.size, off)}
		}
		f.uses = len(e.node.Content)
		f.left = f.uses
	}
	for id := range missing {
		delete(p.chunks, id)
	}
	if len(missing) == 0 {
		return nil
	}
	var paths []string
	var first blob.ID
	for id, ps := range missing {
		paths = append(paths, ps...)
		if first.IsNull() || slices.Compare(id[:], first[:]) < 0 {
			first = id
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	return &Error{Paths: paths, Err: fmt.Errorf("%w: %d chunks these files need are not in the index (chunk %s, ...); run `lifeboat check`", repo.ErrBlobNotFound, len(missing), first.Short())}
}

// runs groups the chunks by pack and cuts each pack's needed ranges into
// runs, ordered so the files that come first in the tree finish first.
func (p *rsPlan) runs() []*rsRun {
	byPack := map[blob.ID][]*rsChunk{}
	for _, c := range p.chunks {
		byPack[c.loc.Pack] = append(byPack[c.loc.Pack], c)
	}
	var runs []*rsRun
	for pk, cs := range byPack {
		slices.SortFunc(cs, func(a, b *rsChunk) int { return cmp.Compare(a.loc.Offset, b.loc.Offset) })
		var r *rsRun
		for _, c := range cs {
			start, end := int64(c.loc.Offset), int64(c.loc.Offset)+int64(c.loc.Length)
			if r == nil || start < r.end || start-r.end > rsMaxGap || end-r.start > rsMaxRun {
				r = &rsRun{pack: pk, start: start, end: end, first: c.uses[0].file}
				runs = append(runs, r)
			}
			r.end = max(r.end, end)
			r.chunks = append(r.chunks, c)
			for _, u := range c.uses {
				r.first = min(r.first, u.file)
			}
		}
	}
	slices.SortFunc(runs, func(a, b *rsRun) int {
		if c := cmp.Compare(a.first, b.first); c != 0 {
			return c
		}
		if c := slices.Compare(a.pack[:], b.pack[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	return runs
}

// filesOf lists the paths of the files that use chunks cs.
func (p *rsPlan) filesOf(cs ...*rsChunk) []string {
	var paths []string
	for _, c := range cs {
		for _, u := range c.uses {
			paths = append(paths, p.entries[p.files[u.file].entry].path)
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}
