package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/osutil"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
)

var rsTestPassword = []byte("restore test password")

// rsRepo is a test repository and where its files are.
type rsRepo struct {
	*repo.Repository
	path string // the repository's directory
}

// newRestoreRepo makes a repository with small packs in a temp dir.
func newRestoreRepo(t testing.TB) *rsRepo {
	t.Helper()
	return newRestoreRepoIn(t, storetest.Local(t))
}

// newRestoreRepoIn makes a repository with small packs in s.
func newRestoreRepoIn(t testing.TB, s storetest.Store) *rsRepo {
	t.Helper()
	ctx := context.Background()
	dir := s.Location
	be := s.Create(t)
	if _, err := repo.Init(ctx, be, rsTestPassword, repo.InitOptions{PackSize: 1 << 20, KDF: crypt.NewKDFParams(1, 64, 1)}); err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, be, rsTestPassword, repo.Options{CacheDir: t.TempDir(), PackSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return &rsRepo{Repository: r, path: dir} // path: a directory for a local store
}

// saveData stores data as content chunks cut by the repository's chunker.
func (r *rsRepo) saveData(t testing.TB, data []byte) []blob.ID {
	t.Helper()
	c, err := r.Chunker(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := r.SaveStream(context.Background(), blob.Workspace, c, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// saveChunk stores one content chunk as is.
func (r *rsRepo) saveChunk(t testing.TB, data []byte) blob.ID {
	t.Helper()
	id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, data)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// file is a file node with data as its content.
func (r *rsRepo) file(t testing.TB, name string, data []byte) Node {
	return Node{Name: []byte(name), Type: TypeFile, Mode: 0o644, MtimeNs: rsTestTime, Size: uint64(len(data)), Content: r.saveData(t, data)}
}

// dir is a directory node listing nodes (sorted here by name).
func (r *rsRepo) dir(t testing.TB, name string, nodes ...Node) Node {
	t.Helper()
	slices.SortFunc(nodes, func(a, b Node) int { return bytes.Compare(a.Name, b.Name) })
	ids, err := SaveDir(context.Background(), r, blob.Workspace, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return Node{Name: []byte(name), Type: TypeDir, Mode: 0o755, MtimeNs: rsTestTime, Subtree: ids}
}

// rawDir is a directory whose one tree blob lists nodes exactly as given:
// no sorting, no checks (for hostile trees).
func (r *rsRepo) rawDir(t testing.TB, name string, nodes ...Node) Node {
	t.Helper()
	b, err := json.Marshal(Tree{Version: TreeVersion, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Tree, b)
	if err != nil {
		t.Fatal(err)
	}
	return Node{Name: []byte(name), Type: TypeDir, Mode: 0o755, MtimeNs: rsTestTime, Subtree: []blob.ID{id}}
}

// manifest flushes the repository and returns a snapshot of root, saved
// and loaded back when save is set (hostile roots cannot always be saved).
func (r *rsRepo) manifest(t testing.TB, root Node, save bool) *Manifest {
	t.Helper()
	ctx := context.Background()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Version: ManifestVersion, Workspace: "ws", Time: time.Unix(1700000000, 0).UTC(), Paths: []string{"/src"}, Root: root, Complete: true}
	if !save {
		return m
	}
	id, err := SaveManifest(ctx, r, m)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := LoadManifest(ctx, r, id)
	if err != nil {
		t.Fatal(err)
	}
	return m2
}

// rsTestTime is a fixed mtime with nanoseconds.
const rsTestTime int64 = 1_600_000_000_123_456_789

// rsCapture records the directory src into the repository as a snapshot
// the way a capture would: depth first in name order, hard links to the
// first name, user.* xattrs, sockets and devices as skipped nodes. Sparse
// files (fewer blocks than size) are cut into fixed 4 MiB chunks and their
// holes are not read; other files go through SaveStream.
func (r *rsRepo) rsCapture(t testing.TB, src string) *Manifest {
	t.Helper()
	seen := map[[2]uint64]string{}
	var walk func(abs, rel string) Node
	walk = func(abs, rel string) Node {
		var st unix.Stat_t
		if err := unix.Lstat(abs, &st); err != nil {
			t.Fatal(err)
		}
		n := Node{Name: []byte(filepath.Base(abs)), Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid, MtimeNs: st.Mtim.Nano()}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			n.Type = TypeDir
			ents, err := os.ReadDir(abs)
			if err != nil {
				t.Fatal(err)
			}
			var kids []Node
			for _, de := range ents {
				kids = append(kids, walk(filepath.Join(abs, de.Name()), JoinPath(rel, de.Name())))
			}
			if n.Subtree, err = SaveDir(context.Background(), r, blob.Workspace, kids); err != nil {
				t.Fatal(err)
			}
		case unix.S_IFREG:
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := seen[key]; ok && st.Nlink > 1 {
				return Node{Name: n.Name, Type: TypeHardlink, LinkPath: []byte(first)}
			}
			seen[key] = rel
			n.Type, n.Size = TypeFile, uint64(st.Size)
			if st.Blocks*512 < st.Size/2 {
				n.Content = r.sparseChunks(t, abs, st.Size)
			} else {
				data, err := os.ReadFile(abs)
				if err != nil {
					t.Fatal(err)
				}
				n.Content = r.saveData(t, data)
			}
		case unix.S_IFLNK:
			target, err := os.Readlink(abs)
			if err != nil {
				t.Fatal(err)
			}
			n.Type, n.LinkTarget, n.Mode = TypeSymlink, []byte(target), 0
			return n
		case unix.S_IFIFO:
			n.Type = TypeFIFO
		case unix.S_IFSOCK:
			return Node{Name: n.Name, Type: TypeSocket}
		default:
			return Node{Name: n.Name, Type: TypeDevice}
		}
		n.Xattrs = rsUserXattrs(t, abs)
		return n
	}
	root := walk(src, "")
	return r.manifest(t, root, true)
}

// sparseChunks stores a sparse file as fixed 4 MiB chunks without reading
// its holes (a hole chunk is stored once as zeros).
func (r *rsRepo) sparseChunks(t testing.TB, p string, size int64) []blob.ID {
	const cs = 4 << 20
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zeroIDs := map[int64]blob.ID{}
	var ids []blob.ID
	for off := int64(0); off < size; off += cs {
		n := min(cs, size-off)
		if osutil.IsHole(int(f.Fd()), off, n) {
			id, ok := zeroIDs[n]
			if !ok {
				id = r.saveChunk(t, make([]byte, n))
				zeroIDs[n] = id
			}
			ids = append(ids, id)
			continue
		}
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.saveChunk(t, buf))
	}
	return ids
}

// rsSnapAt saves a complete snapshot of workspace ws taken at t, with one
// empty file.
func (r *rsRepo) rsSnapAt(tb testing.TB, ws string, t time.Time) *Manifest {
	tb.Helper()
	m := r.manifest(tb, r.dir(tb, "", Node{Name: []byte("f"), Type: TypeFile, Mode: 0o644, MtimeNs: rsTestTime}), false)
	m.Workspace, m.Time, m.Totals = ws, t, Totals{Files: 1, Dirs: 1}
	if _, err := SaveManifest(context.Background(), r, m); err != nil {
		tb.Fatal(err)
	}
	return m
}
