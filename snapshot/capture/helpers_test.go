package capture

import (
	"bytes"
	"context"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// capTestRepo is a repository in a temp dir, reopenable with the same
// local cache (as a later run of lifeboat would).
type capTestRepo struct {
	dir, cache string // dir: the store's location (a directory for a local store)
	store      storetest.Store
}

func newCapTestRepo(t testing.TB) *capTestRepo {
	t.Helper()
	return newCapTestRepoIn(t, storetest.Local(t))
}

// newCapTestRepoIn makes a repository in s.
func newCapTestRepoIn(t testing.TB, s storetest.Store) *capTestRepo {
	t.Helper()
	repotest.Init(t, repotest.Options{Store: s})
	return &capTestRepo{dir: s.Location, cache: t.TempDir(), store: s}
}

// open opens the repository; the test closes it at cleanup (or earlier).
func (tr *capTestRepo) open(t testing.TB) *repo.Repository {
	t.Helper()
	return capTestOpenBackend(t, tr.store.Open(t), repotest.Password, tr.cache)
}

// capTestOpenBackend opens the repository in be with pw and the local
// cache in cache; the test closes it at cleanup.
func capTestOpenBackend(t testing.TB, be backend.Backend, pw []byte, cache string) *repo.Repository {
	t.Helper()
	return repotest.Open(t, be, repotest.Options{Password: pw, Open: repo.Options{CacheDir: cache}})
}

// capTestOpenRepo makes and opens a fresh repository.
func capTestOpenRepo(t testing.TB) *repo.Repository {
	return newCapTestRepo(t).open(t)
}

// capTestOptions are options with a fixed clock and a read counter.
func capTestOptions(counter *atomic.Int64) Options {
	return Options{Workspace: "ws-test", Now: func() time.Time { return time.Unix(1700000000, 0) },
		hooks: &captureHooks{bytesRead: counter, settled: true}}
}

// capTestCacheOptions are capTestOptions counting into a new counter, with
// r's file cache.
func capTestCacheOptions(r *repo.Repository) (Options, *atomic.Int64) {
	read := new(atomic.Int64)
	o := capTestOptions(read)
	o.Cache = r.FileCache()
	return o, read
}

// capTestRecorder is a Progress that keeps the errors it is told.
type capTestRecorder struct {
	snapshot.NoProgress
	files, bytes atomic.Uint64
	errs         atomic.Int64
}

func (p *capTestRecorder) Done(files, bytes uint64) { p.files.Add(files); p.bytes.Add(bytes) }
func (p *capTestRecorder) Error(string, error)      { p.errs.Add(1) }

// capTestCapture runs Run and fails the test on error.
func capTestCapture(t testing.TB, r *repo.Repository, root string, o Options) *snapshot.Manifest {
	t.Helper()
	m, err := Run(context.Background(), r, root, o)
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	if m.ID.IsNull() {
		t.Fatal("Capture returned a manifest without id")
	}
	got, err := snapshot.LoadManifest(context.Background(), r, m.ID)
	if err != nil {
		t.Fatalf("loading the saved manifest: %v", err)
	}
	if got.Root.Subtree == nil || !slices.Equal(got.Root.Subtree, m.Root.Subtree) {
		t.Fatalf("saved manifest root %v, returned %v", got.Root.Subtree, m.Root.Subtree)
	}
	return m
}

// capTestFlatten loads a captured tree into a map by slash path.
func capTestFlatten(t testing.TB, r *repo.Repository, subtree []blob.ID) map[string]*snapshot.Node {
	t.Helper()
	out := map[string]*snapshot.Node{}
	var walk func(prefix string, ids []blob.ID)
	walk = func(prefix string, ids []blob.ID) {
		err := snapshot.LoadDir(context.Background(), r, blob.Workspace, ids, func(n *snapshot.Node) error {
			p := string(n.Name)
			if prefix != "" {
				p = prefix + "/" + p
			}
			cp := *n
			out[p] = &cp
			if n.Type == snapshot.TypeDir {
				walk(p, n.Subtree)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("loading %q: %v", prefix, err)
		}
	}
	walk("", subtree)
	return out
}

// capTestContent returns the content of a file node.
func capTestContent(t testing.TB, r *repo.Repository, n *snapshot.Node) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := r.LoadBlobs(context.Background(), blob.Workspace, blob.Data, repo.BlobsOf(n.Content), func(_ blob.ID, plain []byte) error {
		b.Write(plain)
		return nil
	}); err != nil {
		t.Fatalf("loading %q: %v", n.Name, err)
	}
	return b.Bytes()
}

// capTestExpect builds, independently of Run, the nodes a tree should
// give: by path, with Content left nil (compared as bytes instead).
func capTestExpect(t testing.TB, root string) map[string]*snapshot.Node {
	t.Helper()
	out := map[string]*snapshot.Node{}
	first := map[[2]uint64]string{}
	var walk func(rel string)
	walk = func(rel string) {
		ents, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		slices.Sort(names)
		for _, name := range names {
			p := name
			if rel != "" {
				p = rel + "/" + name
			}
			full := filepath.Join(root, p)
			var st unix.Stat_t
			if err := unix.Lstat(full, &st); err != nil {
				t.Fatal(err)
			}
			n := &snapshot.Node{Name: []byte(name), Mode: st.Mode & 07777, UID: st.Uid, GID: st.Gid,
				User: capTestUser(st.Uid), Group: capTestGroup(st.Gid), MtimeNs: st.Mtim.Nano()}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				n.Type = snapshot.TypeDir
			case unix.S_IFREG:
				n.Type, n.Size = snapshot.TypeFile, uint64(st.Size)
				if st.Nlink > 1 {
					k := [2]uint64{st.Dev, st.Ino}
					if f, ok := first[k]; ok {
						n.Type, n.LinkPath = snapshot.TypeHardlink, []byte(f)
					} else {
						first[k] = p
					}
				}
			case unix.S_IFLNK:
				target, err := os.Readlink(full)
				if err != nil {
					t.Fatal(err)
				}
				n.Type, n.LinkTarget = snapshot.TypeSymlink, []byte(target)
			case unix.S_IFIFO:
				n.Type = snapshot.TypeFIFO
			case unix.S_IFSOCK:
				n.Type = snapshot.TypeSocket
			default:
				n.Type = snapshot.TypeDevice
			}
			if n.Type == snapshot.TypeFile || n.Type == snapshot.TypeDir {
				n.Xattrs = snaptest.UserXattrs(t, full)
			}
			out[p] = n
			if n.Type == snapshot.TypeDir {
				walk(p)
			}
		}
	}
	walk("")
	return out
}

func capTestUser(id uint32) string {
	u, err := user.LookupId(strconv.Itoa(int(id)))
	if err != nil {
		return ""
	}
	return u.Username
}

func capTestGroup(id uint32) string {
	g, err := user.LookupGroupId(strconv.Itoa(int(id)))
	if err != nil {
		return ""
	}
	return g.Name
}

// capTestCompare checks every field of every captured node against the
// filesystem, and every file's content.
// Paths in skip are not compared (their presence is).
func capTestCompare(t testing.TB, r *repo.Repository, root string, m *snapshot.Manifest, skip ...string) {
	t.Helper()
	got := capTestFlatten(t, r, m.Root.Subtree)
	want := capTestExpect(t, root)
	for p, w := range want {
		g, ok := got[p]
		if slices.Contains(skip, p) && ok {
			continue
		}
		if !ok {
			t.Errorf("%q: not captured", p)
			continue
		}
		if !bytes.Equal(g.Name, w.Name) || g.Type != w.Type || g.Mode != w.Mode || g.UID != w.UID || g.GID != w.GID ||
			g.User != w.User || g.Group != w.Group || g.MtimeNs != w.MtimeNs || g.Size != w.Size ||
			!bytes.Equal(g.LinkTarget, w.LinkTarget) || !bytes.Equal(g.LinkPath, w.LinkPath) {
			t.Errorf("%q:\n got %+v\nwant %+v", p, capTestMeta(g), capTestMeta(w))
		}
		if len(g.Xattrs) != len(w.Xattrs) {
			t.Errorf("%q: xattrs %v, want %v", p, g.Xattrs, w.Xattrs)
		} else {
			for i := range g.Xattrs {
				if g.Xattrs[i].Name != w.Xattrs[i].Name || !bytes.Equal(g.Xattrs[i].Value, w.Xattrs[i].Value) {
					t.Errorf("%q: xattr %v, want %v", p, g.Xattrs[i], w.Xattrs[i])
				}
			}
		}
		switch g.Type {
		case snapshot.TypeFile:
			data, err := os.ReadFile(filepath.Join(root, p))
			if err != nil {
				t.Fatal(err)
			}
			if c := capTestContent(t, r, g); !bytes.Equal(c, data) {
				t.Errorf("%q: content of %d bytes differs from the file's %d", p, len(c), len(data))
			}
			if len(data) == 0 && g.Content != nil {
				t.Errorf("%q: empty file with content ids %v", p, g.Content)
			}
		case snapshot.TypeDir:
			if len(g.Subtree) == 0 {
				t.Errorf("%q: directory without subtree", p)
			}
		default:
			if g.Content != nil || g.Subtree != nil {
				t.Errorf("%q: %s with content or subtree", p, g.Type)
			}
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%q: captured but not in the tree", p)
		}
	}
}

func capTestMeta(n *snapshot.Node) snapshot.Node {
	c := *n
	c.Content, c.Subtree, c.Xattrs = nil, nil, nil
	return c
}

// capTestAge sets every regular file's mtime an hour back, so the file
// cache trusts it (a just-written file is "racily clean" and not cached).
func capTestAge(t testing.TB, root string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			return os.Chtimes(p, old, old)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// capTestWrite writes files (path -> content) under root, making parents.
func capTestWrite(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// capTestErrors returns the manifest's errors by path.
func capTestErrors(m *snapshot.Manifest) map[string]string {
	out := map[string]string{}
	for _, e := range m.Errors {
		out[e.Path] = e.Error
	}
	return out
}
