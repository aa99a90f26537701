package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// Verify is the check a snapshot passes before it is promoted: its
// manifest loads back and decodes, every tree blob it reaches loads and
// decodes, and every chunk of every file is in the repository index. With
// a key that has the sensitive tier, its sensitive part is checked the
// same way. It reads no file content (the repository verified every blob
// when it was sealed, and the index lists only durable packs), so it costs
// one index lookup per chunk (4,096 to a read transaction) and reads every
// distinct tree blob once (a directory level's trees pack by pack, close
// ones in one request).
func Verify(ctx context.Context, r *repo.Repository, id blob.ID) error {
	return verify(ctx, r, id, nil)
}

// VerifiedTrees remembers the directories whose subtrees passed Verify in
// this process, for one repository (and key), so that a later Verify
// through it (Options.Verified) does not check them again while the local
// index has lost no blob since (its removal generation, which moves on
// when any blob entry leaves it, has not moved): every tree blob below
// was loaded and decoded, and every chunk found, and all still are in
// the index. A directory is its tier and tree blob ids, and a tree blob's
// id is a keyed digest of its content, so the same directory in a later
// snapshot is the same content: a `lifeboat serve` re-capturing an
// unchanged workspace checks only the directories that changed. The zero
// value is ready, and it is safe for concurrent use. It holds at most
// verifiedTreesMax directories (about 10 MiB), and forgets them all when
// more pass.
type VerifiedTrees struct {
	mu   sync.Mutex
	gen  uint64              // the removal generation they passed at
	dirs map[string]struct{} // keys as verifier.seen's
}

const verifiedTreesMax = 1 << 17

// has reports whether directory key passed at removal generation gen.
func (vt *VerifiedTrees) has(gen uint64, key string) bool {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	_, ok := vt.dirs[key]
	return ok && vt.gen == gen
}

// add records that dirs passed at removal generation gen.
func (vt *VerifiedTrees) add(gen uint64, dirs map[string]bool) {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	if vt.gen != gen || len(vt.dirs)+len(dirs) > verifiedTreesMax {
		vt.gen, vt.dirs = gen, nil
	}
	if len(dirs) > verifiedTreesMax {
		return
	}
	if vt.dirs == nil {
		vt.dirs = make(map[string]struct{}, len(dirs))
	}
	for k := range dirs {
		vt.dirs[k] = struct{}{}
	}
}

func verify(ctx context.Context, r *repo.Repository, id blob.ID, vt *VerifiedTrees) error {
	// The removal generation is read before anything is looked up: a
	// blob that leaves the index after it moves it on for the next one.
	var gen uint64
	if fc := r.FileCache(); vt != nil && fc != nil {
		g, err := fc.FileCacheGen()
		if err != nil {
			return err
		}
		gen = g
	}
	m, err := snapshot.LoadManifest(ctx, r, id)
	if err != nil {
		return err
	}
	v := verifier{ctx: ctx, r: r, seen: map[string]bool{}}
	if gen != 0 { // 0: the index keeps no count, so it vouches for nothing
		v.passed, v.gen = vt, gen
	}
	if err := v.dir(blob.Workspace, m.Root.Subtree, ""); err != nil {
		return fmt.Errorf("verifying snapshot %s: %w", id.Short(), err)
	}
	if m.Sensitive == nil || !hasTier(r, blob.Sensitive) {
		return v.finish(id)
	}
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		return fmt.Errorf("verifying snapshot %s: %w", id.Short(), err)
	}
	for _, t := range part.Trees {
		if err := v.dir(blob.Sensitive, t.Root.Subtree, t.Path); err != nil {
			return fmt.Errorf("verifying snapshot %s: %w", id.Short(), err)
		}
	}
	return v.finish(id)
}

// finish ends a verify of snapshot id that passed. With VerifiedTrees, it
// reads the removal generation again: when it has not moved, the
// directories seen passed and are recorded; when it has, a blob left the
// index while this verify skipped directories on the generation's word,
// so the snapshot is verified again in full.
func (v *verifier) finish(id blob.ID) error {
	if v.passed == nil {
		return nil
	}
	if verifyGenRead != nil {
		verifyGenRead()
	}
	now, err := v.r.FileCache().FileCacheGen()
	if err != nil {
		return err
	}
	switch {
	case now == v.gen:
		v.passed.add(v.gen, v.seen)
	case v.skipped:
		return verify(v.ctx, v.r, id, nil)
	}
	return nil
}

// verifyGenRead, when set (tests), is called right before a verify
// through VerifiedTrees reads the removal generation again.
var verifyGenRead func()

type verifier struct {
	ctx  context.Context
	r    *repo.Repository
	seen map[string]bool // directories checked, by tier and tree blob ids
	// passed holds directories whose subtrees passed an earlier Verify
	// at removal generation gen, not checked again (nil: none).
	passed  *VerifiedTrees
	gen     uint64
	skipped bool // some directory was not checked: it passed before

	// The chunks of the files loaded so far, looked up in batches of
	// verifyBatch, each batch in one read transaction of the index
	// (repo.LookupBlobs): a chunk and the file it belongs to.
	ids   []blob.ID
	files []int
	paths []string
}

// verifyBatch is the number of chunks looked up at once; verifyDirs the
// number of directories whose trees are loaded at once.
const (
	verifyBatch = 4096
	verifyDirs  = 1024
)

// vdir is a directory to check: its tree blobs and its path.
type vdir struct {
	subtree []blob.ID
	path    string
}

// dir checks the directory of tree blobs subtree at path and everything
// below it, a level at a time: the trees of up to verifyDirs directories
// of a level are read together, pack by pack (loadTrees), then their
// entries are checked as LoadDir would, each file's chunks looked up.
func (v *verifier) dir(tier blob.Tier, subtree []blob.ID, path string) error {
	var level []vdir
	v.add(&level, tier, subtree, path)
	for len(level) > 0 {
		var next []vdir
		for len(level) > 0 {
			batch := level[:min(len(level), verifyDirs)]
			level = level[len(batch):]
			trees, err := v.loadTrees(tier, batch)
			if err != nil {
				return err
			}
			for _, d := range batch {
				if err := v.entries(tier, d, trees, &next); err != nil {
					return err
				}
			}
		}
		level = next
	}
	return v.lookup(tier)
}

// add appends the directory of tree blobs subtree at path to level,
// unless a directory of the same trees was checked already.
func (v *verifier) add(level *[]vdir, tier blob.Tier, subtree []blob.ID, path string) {
	key := make([]byte, 1, 1+len(subtree)*blob.IDSize)
	key[0] = byte(tier)
	for _, id := range subtree {
		key = append(key, id[:]...)
	}
	if v.seen[string(key)] {
		return
	}
	v.seen[string(key)] = true
	if v.passed != nil && v.passed.has(v.gen, string(key)) {
		v.skipped = true
		return
	}
	*level = append(*level, vdir{subtree, path})
}

// entries checks the entries of d, whose trees are in trees, as LoadDir
// does (snapshot.EachNode: names increasing across its tree blobs), queues its
// subdirectories on next and gathers its files' chunks.
func (v *verifier) entries(tier blob.Tier, d vdir, trees map[blob.ID]*snapshot.Tree, next *[]vdir) error {
	tree := func(id blob.ID) (*snapshot.Tree, error) { return trees[id], nil }
	return snapshot.EachNode(d.subtree, tree, func(n *snapshot.Node) error {
		p := d.path + "/" + string(n.Name)
		switch {
		case n.Type == snapshot.TypeDir:
			v.add(next, tier, n.Subtree, p)
		case n.Type == snapshot.TypeFile && len(n.Content) > 0:
			v.paths = append(v.paths, p)
			for _, c := range n.Content {
				v.ids, v.files = append(v.ids, c), append(v.files, len(v.paths)-1)
			}
			if len(v.ids) >= verifyBatch {
				return v.lookup(tier)
			}
		}
		return nil
	})
}

// loadTrees loads and decodes the tree blobs of dirs. Those indexed in a
// pack are read pack by pack, close ones in one request
// (repo.StreamPack, which checks each against its id); any other, and
// any in a pack that cannot be read, through LoadBlob, which tries the
// blob's other copies and says why it cannot be loaded.
func (v *verifier) loadTrees(tier blob.Tier, dirs []vdir) (map[blob.ID]*snapshot.Tree, error) {
	trees := map[blob.ID]*snapshot.Tree{}
	var ids []blob.ID
	for _, d := range dirs {
		for _, id := range d.subtree {
			if _, ok := trees[id]; !ok {
				trees[id] = nil
				ids = append(ids, id)
			}
		}
	}
	byPack := map[blob.ID][]repo.PackEntry{}
	err := v.r.LookupBlobs(tier, blob.Tree, ids, func(i int, loc repo.Location, ok bool) error {
		if ok {
			byPack[loc.Pack] = append(byPack[loc.Pack], loc.Entry)
		}
		return nil
	})
	var lerr *repo.LookupError
	if err != nil && !errors.As(err, &lerr) { // a blob still in an open pack: LoadBlob below says so
		return nil, err
	}
	for packID, es := range byPack {
		slices.SortFunc(es, func(a, b repo.PackEntry) int { return cmp.Compare(a.Offset, b.Offset) })
		err := v.r.StreamPack(v.ctx, tier, packID, es, repo.StreamOptions{Gap: verifyGap, MaxRead: verifyMaxRead}, func(i int, _, plain []byte) error {
			t, err := snapshot.DecodeTree(plain)
			if err != nil {
				return fmt.Errorf("tree %s: %w", es[i].ID.Short(), err)
			}
			trees[es[i].ID] = t
			return nil
		})
		var serr *repo.StreamError
		if err != nil && !errors.As(err, &serr) {
			return nil, err
		}
	}
	var buf []byte
	for _, id := range ids {
		if trees[id] != nil {
			continue
		}
		b, err := v.r.LoadBlob(v.ctx, tier, blob.Tree, id, buf)
		if err != nil {
			return nil, fmt.Errorf("tree %s: %w", id.Short(), err)
		}
		t, err := snapshot.DecodeTree(b)
		if err != nil {
			return nil, fmt.Errorf("tree %s: %w", id.Short(), err)
		}
		trees[id] = t
		buf = b[:0]
	}
	return trees, nil
}

// The reads of loadTrees: trees closer than verifyGap in a pack are read
// in one request of at most verifyMaxRead.
const (
	verifyGap     = 64 << 10
	verifyMaxRead = 4 << 20
)

// lookup checks that every chunk gathered so far is in the index, and
// lets them go.
func (v *verifier) lookup(tier blob.Tier) error {
	err := v.r.LookupBlobs(tier, blob.Data, v.ids, func(i int, _ repo.Location, ok bool) error {
		if !ok {
			return fmt.Errorf("%q: chunk %s is not in the index", v.paths[v.files[i]], v.ids[i].Short())
		}
		return nil
	})
	v.ids, v.files, v.paths = v.ids[:0], v.files[:0], v.paths[:0]
	return err
}
