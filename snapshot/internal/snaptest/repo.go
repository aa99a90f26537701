package snaptest

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
	"lifeboat/internal/osutil"
	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// Password is the password of every Repo.
var Password = []byte("restore test password")

// Repo is a test repository and where its files are. Its helpers build
// snapshots by hand (SaveDir, SaveStream, Flush, SaveManifest), never
// through the capture pipeline, so restore is tested on its own.
type Repo struct {
	*repo.Repository
	Path string // the repository's directory
}

// NewRepo makes a repository with small packs in a temp dir.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	return NewRepoIn(t, storetest.Local(t))
}

// NewRepoIn makes a repository with small packs in s.
func NewRepoIn(t testing.TB, s storetest.Store) *Repo {
	t.Helper()
	o := repotest.Options{Store: s, Password: Password, Init: repo.InitOptions{PackSize: 1 << 20}, Open: repo.Options{PackSize: 1 << 20}}
	return &Repo{Repository: repotest.New(t, o), Path: s.Location} // path: a directory for a local store
}

// SaveData stores data as content chunks cut by the repository's chunker.
func (r *Repo) SaveData(t testing.TB, data []byte) []blob.ID {
	t.Helper()
	ids, _, err := r.SaveStream(context.Background(), blob.Workspace, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// SaveChunk stores one content chunk as is.
func (r *Repo) SaveChunk(t testing.TB, data []byte) blob.ID {
	t.Helper()
	id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, data)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// File is a file node with data as its content.
func (r *Repo) File(t testing.TB, name string, data []byte) snapshot.Node {
	return snapshot.Node{Name: []byte(name), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: Mtime, Size: uint64(len(data)), Content: r.SaveData(t, data)}
}

// Dir is a directory node listing nodes (sorted here by name).
func (r *Repo) Dir(t testing.TB, name string, nodes ...snapshot.Node) snapshot.Node {
	t.Helper()
	slices.SortFunc(nodes, func(a, b snapshot.Node) int { return bytes.Compare(a.Name, b.Name) })
	ids, err := snapshot.SaveDir(context.Background(), r, blob.Workspace, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot.Node{Name: []byte(name), Type: snapshot.TypeDir, Mode: 0o755, MtimeNs: Mtime, Subtree: ids}
}

// RawDir is a directory whose one tree blob lists nodes exactly as given:
// no sorting, no checks (for hostile trees).
func (r *Repo) RawDir(t testing.TB, name string, nodes ...snapshot.Node) snapshot.Node {
	t.Helper()
	b, err := json.Marshal(snapshot.Tree{Version: snapshot.TreeVersion, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Tree, b)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot.Node{Name: []byte(name), Type: snapshot.TypeDir, Mode: 0o755, MtimeNs: Mtime, Subtree: []blob.ID{id}}
}

// Manifest flushes the repository and returns a snapshot of root, saved
// and loaded back when save is set (hostile roots cannot always be saved).
func (r *Repo) Manifest(t testing.TB, root snapshot.Node, save bool) *snapshot.Manifest {
	t.Helper()
	ctx := context.Background()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m := &snapshot.Manifest{Version: snapshot.ManifestVersion, Workspace: "ws", Time: time.Unix(1700000000, 0).UTC(), Paths: []string{"/src"}, Root: root, Complete: true}
	if !save {
		return m
	}
	id, err := snapshot.SaveManifest(ctx, r, m)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := snapshot.LoadManifest(ctx, r, id)
	if err != nil {
		t.Fatal(err)
	}
	return m2
}

// Mtime is a fixed mtime with nanoseconds.
const Mtime int64 = 1_600_000_000_123_456_789

// SnapshotOf records the directory src into the repository as a snapshot
// the way a capture would: depth first in name order, hard links to the
// first name, user.* xattrs, sockets and devices as skipped nodes. Sparse
// files (fewer blocks than size) are cut into fixed 4 MiB chunks and their
// holes are not read; other files go through SaveStream.
func (r *Repo) SnapshotOf(t testing.TB, src string) *snapshot.Manifest {
	t.Helper()
	seen := map[[2]uint64]string{}
	var walk func(abs, rel string) snapshot.Node
	walk = func(abs, rel string) snapshot.Node {
		var st unix.Stat_t
		if err := unix.Lstat(abs, &st); err != nil {
			t.Fatal(err)
		}
		n := snapshot.Node{Name: []byte(filepath.Base(abs)), Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid, MtimeNs: st.Mtim.Nano()}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			n.Type = snapshot.TypeDir
			ents, err := os.ReadDir(abs)
			if err != nil {
				t.Fatal(err)
			}
			var kids []snapshot.Node
			for _, de := range ents {
				kids = append(kids, walk(filepath.Join(abs, de.Name()), snapshot.JoinPath(rel, de.Name())))
			}
			if n.Subtree, err = snapshot.SaveDir(context.Background(), r, blob.Workspace, kids); err != nil {
				t.Fatal(err)
			}
		case unix.S_IFREG:
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := seen[key]; ok && st.Nlink > 1 {
				return snapshot.Node{Name: n.Name, Type: snapshot.TypeHardlink, LinkPath: []byte(first)}
			}
			seen[key] = rel
			n.Type, n.Size = snapshot.TypeFile, uint64(st.Size)
			if st.Blocks*512 < st.Size/2 {
				n.Content = r.sparseChunks(t, abs, st.Size)
			} else {
				data, err := os.ReadFile(abs)
				if err != nil {
					t.Fatal(err)
				}
				n.Content = r.SaveData(t, data)
			}
		case unix.S_IFLNK:
			target, err := os.Readlink(abs)
			if err != nil {
				t.Fatal(err)
			}
			n.Type, n.LinkTarget, n.Mode = snapshot.TypeSymlink, []byte(target), 0
			return n
		case unix.S_IFIFO:
			n.Type = snapshot.TypeFIFO
		case unix.S_IFSOCK:
			return snapshot.Node{Name: n.Name, Type: snapshot.TypeSocket}
		default:
			return snapshot.Node{Name: n.Name, Type: snapshot.TypeDevice}
		}
		n.Xattrs = UserXattrs(t, abs)
		return n
	}
	root := walk(src, "")
	return r.Manifest(t, root, true)
}

// sparseChunks stores a sparse file as fixed 4 MiB chunks without reading
// its holes (a hole chunk is stored once as zeros).
func (r *Repo) sparseChunks(t testing.TB, p string, size int64) []blob.ID {
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
				id = r.SaveChunk(t, make([]byte, n))
				zeroIDs[n] = id
			}
			ids = append(ids, id)
			continue
		}
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.SaveChunk(t, buf))
	}
	return ids
}

// SnapAt saves a complete snapshot of workspace ws taken at t, with one
// empty file.
func (r *Repo) SnapAt(tb testing.TB, ws string, t time.Time) *snapshot.Manifest {
	tb.Helper()
	m := r.Manifest(tb, r.Dir(tb, "", snapshot.Node{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: Mtime}), false)
	m.Workspace, m.Time, m.Totals = ws, t, snapshot.Totals{Files: 1, Dirs: 1}
	if _, err := snapshot.SaveManifest(context.Background(), r, m); err != nil {
		tb.Fatal(err)
	}
	return m
}
