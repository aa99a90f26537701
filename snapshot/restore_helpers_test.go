package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
)

// Test helpers for restore. They build snapshots by hand (SaveDir,
// SaveStream, Flush, SaveManifest) and never use the capture pipeline, so
// restore is tested on its own.

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
				kids = append(kids, walk(filepath.Join(abs, de.Name()), safeJoin(rel, de.Name())))
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
		if rsIsHole(int(f.Fd()), off, n) {
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

// rsUserXattrs lists p's user.* extended attributes, sorted.
func rsUserXattrs(t testing.TB, p string) []Xattr {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		t.Fatal(err)
	}
	var out []Xattr
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v := make([]byte, 64<<10)
		k, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Xattr{Name: name, Value: v[:k]})
	}
	slices.SortFunc(out, func(a, b Xattr) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// rsDump describes every entry under root, metadata and content hash, one
// line each, for exact comparison. Sockets are left out (restore skips
// them); hard links show as a shared inode number relative to the tree.
// When times is false, directory mtimes are left out (they change when
// entries are added).
func rsDump(t testing.TB, root string, times bool) string {
	t.Helper()
	var b strings.Builder
	inodes := map[uint64]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		typ := st.Mode & unix.S_IFMT
		if typ == unix.S_IFSOCK || typ == unix.S_IFCHR || typ == unix.S_IFBLK {
			return nil // never restored
		}
		ino, ok := inodes[st.Ino]
		if !ok {
			ino = len(inodes)
			inodes[st.Ino] = ino
		}
		fmt.Fprintf(&b, "%q type=%o mode=%04o owner=%d:%d", rel, typ, st.Mode&0o7777, st.Uid, st.Gid)
		if typ != unix.S_IFDIR || times {
			fmt.Fprintf(&b, " mtime=%d", st.Mtim.Nano())
		}
		switch typ {
		case unix.S_IFREG:
			fmt.Fprintf(&b, " ino=%d size=%d sha=%x", ino, st.Size, rsFileHash(t, p))
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %q", target)
		}
		if typ != unix.S_IFLNK {
			for _, x := range rsUserXattrs(t, p) {
				fmt.Fprintf(&b, " %s=%q", x.Name, x.Value)
			}
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// rsFileHash hashes a file's logical content in 1 MiB blocks; an
// all-zero block hashes the same whether it is a hole or written zeros,
// and holes are not read (a 1 GiB sparse file costs a few reads).
func rsFileHash(t testing.TB, p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const bs = 1 << 20
	h := sha256.New()
	buf := make([]byte, bs)
	for off := int64(0); off < fi.Size(); off += bs {
		n := min(bs, fi.Size()-off)
		if !rsIsHole(int(f.Fd()), off, n) {
			if _, err := f.ReadAt(buf[:n], off); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:n], make([]byte, n)) {
				fmt.Fprintf(h, "data %d:", off)
				h.Write(buf[:n])
				continue
			}
		}
		fmt.Fprintf(h, "zeros %d+%d;", off, n)
	}
	return h.Sum(nil)
}

// rsLeftovers lists .lifeboat-* names in dir.
func rsLeftovers(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".lifeboat-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// rsSentinel makes a directory with a file, a subdirectory and fixed
// metadata next to where a restore will write, and returns a check that
// it is unchanged, byte for byte and in every recorded field.
func rsSentinel(t testing.TB, parent string) (dir string, check func()) {
	t.Helper()
	dir = filepath.Join(parent, "sentinel")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"f", "sub/g"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("sentinel "+p), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"sub/g", "f", "sub", "."} {
		ts := []unix.Timespec{unix.NsecToTimespec(1e18), unix.NsecToTimespec(1e18)}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, p), ts, 0); err != nil {
			t.Fatal(err)
		}
	}
	before := rsDump(t, dir, true)
	return dir, func() {
		t.Helper()
		if after := rsDump(t, dir, true); after != before {
			t.Errorf("sentinel %s changed:\nbefore:\n%s\nafter:\n%s", dir, before, after)
		}
	}
}

// rsProgress records progress calls; onDone runs after each Done.
type rsProgress struct {
	mu     sync.Mutex
	files  uint64
	bytes  uint64
	errs   map[string]string
	onDone func()
}

func (p *rsProgress) Start(uint64, uint64) {}
func (p *rsProgress) Done(files, bytes uint64) {
	p.mu.Lock()
	p.files += files
	p.bytes += bytes
	f := p.onDone
	p.mu.Unlock()
	if f != nil {
		f()
	}
}
func (p *rsProgress) Error(path string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errs == nil {
		p.errs = map[string]string{}
	}
	p.errs[path] = err.Error()
}

// rsRandom fills b from a seeded xorshift generator (fast, reproducible).
func rsRandom(b []byte, seed uint64) {
	x := seed + 0x9e3779b97f4a7c15 // splitmix64 of the seed: distinct seeds, distinct streams
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	if x == 0 {
		x = 1
	}
	for i := range b {
		if i%8 == 0 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		b[i] = byte(x >> (8 * (i % 8)))
	}
}
