package restore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/pack"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// rsFakeLocator answers LookupBlobs from a map, in a random order, as the
// repository does (key order); ids in open are "still in an open pack".
// It fails the test if one id is asked twice in a call.
type rsFakeLocator struct {
	t     *testing.T
	rng   *rand.Rand
	locs  map[blob.ID]index.Location
	open  map[blob.ID]bool
	fail  error // returned as is, when set
	asked int
}

func (l *rsFakeLocator) LookupBlobs(_ blob.Tier, _ blob.Type, ids []blob.ID, fn func(int, index.Location, bool) error) error {
	if l.fail != nil {
		return l.fail
	}
	seen := map[blob.ID]bool{}
	for _, id := range ids {
		if seen[id] {
			l.t.Fatalf("chunk %s asked twice in one lookup", id.Short())
		}
		seen[id] = true
	}
	l.asked += len(ids)
	for _, i := range l.rng.Perm(len(ids)) {
		if l.open[ids[i]] {
			return &repo.LookupError{Index: i, Err: fmt.Errorf("blob %s is still in an open pack: call Flush before loading it", ids[i].Short())}
		}
		loc, ok := l.locs[ids[i]]
		if err := fn(i, loc, ok); err != nil {
			return err
		}
	}
	return nil
}

// rsChunkPlan is a plan of regular files, each with the chunks named by
// the letters of its content ("ab" = chunk a, then chunk b) and the size
// their lengths add up to, plus a locator knowing chunks a to m (chunk a
// of 1 byte, b of 2, ...), not the others.
func rsChunkPlan(t *testing.T, rng *rand.Rand, files map[string]string) (*rsPlan, *rsFakeLocator, map[byte]blob.ID) {
	ids := map[byte]blob.ID{}
	l := &rsFakeLocator{t: t, rng: rng, locs: map[blob.ID]index.Location{}, open: map[blob.ID]bool{}}
	for c := byte('a'); c <= 'z'; c++ {
		var id blob.ID
		id[0], id[1] = c, byte(rng.Uint32())
		ids[c] = id
		if c <= 'm' {
			l.locs[id] = index.Location{Pack: blob.ID{1}, Entry: pack.Entry{Type: blob.Data, ID: id, Offset: uint32(c) * 100, PlainLen: uint32(c - 'a' + 1)}}
		}
	}
	p := &rsPlan{chunks: map[blob.ID]*rsChunk{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		n := &snapshot.Node{Name: []byte(name), Type: snapshot.TypeFile}
		var size int64
		for _, c := range []byte(files[name]) {
			n.Content = append(n.Content, ids[c])
			size += int64(c - 'a' + 1)
		}
		p.entries = append(p.entries, rsEntry{node: n, path: name, name: name, file: int32(len(p.files))})
		p.files = append(p.files, &rsFile{entry: int32(len(p.entries) - 1), size: size, fd: -1})
	}
	return p, l, ids
}

// planChunks looks each distinct chunk up once, places every use of a
// found chunk, fails naming every file that needs a chunk not indexed
// (and only those), names the file first needing a chunk in an open pack,
// refuses a place the index gives that is not the chunk's own (another
// id, or not a data blob), and refuses a file whose chunks do not add up
// to its size.
func TestPlanChunks(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)

	t.Run("all found", func(t *testing.T) {
		p, l, ids := rsChunkPlan(t, rng, map[string]string{"f1": "abca", "f2": "ca", "f3": "m"})
		if err := p.planChunks(l, blob.Workspace); err != nil {
			t.Fatal(err)
		}
		if l.asked != 4 || len(p.chunks) != 4 {
			t.Fatalf("%d chunks asked, %d planned; want 4 distinct", l.asked, len(p.chunks))
		}
		want := map[byte][]rsUse{'a': {{0, 0}, {0, 6}, {1, 3}}, 'b': {{0, 1}}, 'c': {{0, 3}, {1, 0}}, 'm': {{2, 0}}}
		for c, uses := range want {
			ch := p.chunks[ids[c]]
			if ch == nil || ch.loc != l.locs[ids[c]] || !slices.Equal(ch.uses, uses) {
				t.Errorf("chunk %c: %+v, want uses %v", c, ch, uses)
			}
		}
		for i, f := range p.files {
			if n := len(p.entries[f.entry].node.Content); f.uses != n || f.left != n {
				t.Errorf("file %d: uses %d, left %d; want %d", i, f.uses, f.left, n)
			}
		}
	})

	t.Run("missing chunks name every file", func(t *testing.T) {
		p, l, ids := rsChunkPlan(t, rng, map[string]string{
			"a-fine": "ab", "b-twice": "xax", "c-also": "bx", "d-other": "yy", "e-fine": "m",
		})
		err := p.planChunks(l, blob.Workspace)
		var re *Error
		if !errors.As(err, &re) || !errors.Is(err, repo.ErrBlobNotFound) {
			t.Fatalf("got %v, want a RestoreError wrapping ErrBlobNotFound", err)
		}
		if want := []string{"b-twice", "c-also", "d-other"}; !slices.Equal(re.Paths, want) {
			t.Errorf("paths %q, want %q", re.Paths, want)
		}
		if !strings.Contains(err.Error(), "2 chunks") || !strings.Contains(err.Error(), ids['x'].Short()) {
			t.Errorf("error %q: want the count of missing chunks and the first by id (x)", err)
		}
		for _, c := range []byte("xy") {
			if _, ok := p.chunks[ids[c]]; ok {
				t.Errorf("missing chunk %c left in the plan", c)
			}
		}
	})

	t.Run("chunk in an open pack", func(t *testing.T) {
		p, l, ids := rsChunkPlan(t, rng, map[string]string{"a": "ab", "b": "cd", "c": "d"})
		l.open[ids['d']] = true
		err := p.planChunks(l, blob.Workspace)
		var re *Error
		if !errors.As(err, &re) || !slices.Equal(re.Paths, []string{"b"}) ||
			!strings.Contains(err.Error(), "open pack") || !strings.Contains(err.Error(), ids['d'].Short()) {
			t.Fatalf("got %v, want an error naming b, chunk d and the open pack", err)
		}
	})

	t.Run("lookup fails", func(t *testing.T) {
		p, l, _ := rsChunkPlan(t, rng, map[string]string{"a": "ab"})
		l.fail = errors.New("the index is on fire")
		if err := p.planChunks(l, blob.Workspace); !errors.Is(err, l.fail) || !strings.Contains(err.Error(), "2 chunks") {
			t.Fatalf("got %v, want the lookup's error", err)
		}
	})

	t.Run("the index gives another blob's place", func(t *testing.T) {
		for _, wrong := range []func(*index.Location, map[byte]blob.ID){
			func(l *index.Location, ids map[byte]blob.ID) { l.ID = ids['a'] },
			func(l *index.Location, _ map[byte]blob.ID) { l.Type = blob.Tree },
		} {
			p, l, ids := rsChunkPlan(t, rng, map[string]string{"a": "ab", "b": "c"})
			loc := l.locs[ids['c']]
			wrong(&loc, ids)
			l.locs[ids['c']] = loc
			err := p.planChunks(l, blob.Workspace)
			var re *Error
			if !errors.As(err, &re) || !errors.Is(err, repo.ErrCorrupt) || !slices.Equal(re.Paths, []string{"b"}) ||
				!strings.Contains(err.Error(), ids['c'].Short()) {
				t.Fatalf("got %v, want ErrCorrupt naming b and chunk c", err)
			}
		}
	})

	t.Run("size mismatch", func(t *testing.T) {
		p, l, _ := rsChunkPlan(t, rng, map[string]string{"a": "ab", "b": "c"})
		p.files[1].size++
		err := p.planChunks(l, blob.Workspace)
		var re *Error
		if !errors.As(err, &re) || !errors.Is(err, snapshot.ErrUnsafeEntry) || !slices.Equal(re.Paths, []string{"b"}) {
			t.Fatalf("got %v, want ErrUnsafeEntry naming b", err)
		}
	})
}
