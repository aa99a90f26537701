package snaptest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// PackReads is a backend that records every Load of a pack.
type PackReads struct {
	backend.Backend
	mu    sync.Mutex
	loads map[string][][2]int64 // pack -> [offset, end)
}

func (b *PackReads) Load(ctx context.Context, h backend.Handle, off int64, n int) ([]byte, error) {
	if h.Type == backend.Pack {
		b.mu.Lock()
		b.loads[h.Name] = append(b.loads[h.Name], [2]int64{off, off + int64(n)})
		b.mu.Unlock()
	}
	return b.Backend.Load(ctx, h, off, n)
}

// Ranges returns the ranges read of each pack so far, by pack name.
func (b *PackReads) Ranges() map[string][][2]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := make(map[string][][2]int64, len(b.loads))
	for k, v := range b.loads {
		m[k] = append([][2]int64(nil), v...)
	}
	return m
}

// Count returns how many pack reads there were so far.
func (b *PackReads) Count() int {
	n := 0
	for _, rs := range b.Ranges() {
		n += len(rs)
	}
	return n
}

// Reopen opens r's repository again, with a cache of its own, through a
// PackReads; it is closed when t ends.
func (r *Repo) Reopen(t testing.TB) (*repo.Repository, *PackReads) {
	t.Helper()
	pr := &PackReads{Backend: r.Backend(), loads: map[string][][2]int64{}}
	r2, err := repo.Open(context.Background(), pr, Password, repo.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r2.Close(context.Background()) })
	return r2, pr
}

// WideTree saves a tree of 6 directories of 6 directories of 6
// directories, each deepest one holding an empty file named after its
// path (d5/d5/d5 holds f-5-5-5), and returns its root (a directory named
// "root") and the number of its directories.
func (r *Repo) WideTree(t testing.TB) (snapshot.Node, int) {
	t.Helper()
	dirs := 1
	var level func(depth int, name, path string) snapshot.Node
	level = func(depth int, name, path string) snapshot.Node {
		dirs++
		if depth == 3 { // a file of its own: no two directories share a tree
			return r.Dir(t, name, snapshot.Node{Name: []byte("f" + path), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: Mtime})
		}
		var nodes []snapshot.Node
		for i := range 6 {
			nodes = append(nodes, level(depth+1, fmt.Sprintf("d%d", i), fmt.Sprintf("%s-%d", path, i)))
		}
		return r.Dir(t, name, nodes...)
	}
	root := level(0, "root", "")
	return root, dirs - 1
}

// Blobs serves blobs from memory by id, one at a time (it is not a
// snapshot.TreeSource); a missing one is repo.ErrBlobNotFound.
type Blobs map[blob.ID][]byte

func (l Blobs) LoadBlob(_ context.Context, _ blob.Tier, _ blob.Type, id blob.ID, _ []byte) ([]byte, error) {
	b, ok := l[id]
	if !ok {
		return nil, repo.ErrBlobNotFound
	}
	return b, nil
}
