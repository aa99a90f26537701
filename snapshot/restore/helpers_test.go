package restore

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// Test helpers for restore. They build snapshots by hand (SaveDir,
// SaveStream, Flush, SaveManifest) and never use the capture pipeline, so
// restore is tested on its own.

// rsNoExchange is renameat2 on a filesystem that refuses RENAME_EXCHANGE.
func rsNoExchange(ofd int, op string, nfd int, np string, flags uint) error {
	if flags&unix.RENAME_EXCHANGE != 0 {
		return unix.EINVAL
	}
	return unix.Renameat2(ofd, op, nfd, np, flags)
}

// rsTempDirForReadOnly returns a new temp dir whose directories are made
// writable again when the test ends: read-only directories would stop
// t.TempDir's removal.
func rsTempDirForReadOnly(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	t.Cleanup(func() {
		_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if d != nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
	})
	return base
}

// rsCleanRemoves runs CleanStaging on parent and fails unless it found
// only path and removed it (the failure says when), leaving nothing in
// parent.
func rsCleanRemoves(t *testing.T, parent, path, when string) {
	t.Helper()
	found, err := CleanStaging(parent)
	if err != nil || len(found) != 1 || found[0].Path != path || !found[0].Removed {
		t.Fatalf("clean-up %s: %+v %v", when, found, err)
	}
	rsNoLeftovers(t, parent)
}

// rsNoLeftovers fails the test if dir holds a .lifeboat-* name.
func rsNoLeftovers(t *testing.T, dir string) {
	t.Helper()
	if l := snaptest.Leftovers(t, dir); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
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
	before := snaptest.Dump(t, dir, true)
	return dir, func() {
		t.Helper()
		if after := snaptest.Dump(t, dir, true); after != before {
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

// rsRestoreExact captures src, restores the snapshot into target and fails
// the test unless the restored tree is src's (modes, sizes, holes, xattrs:
// snaptest.Dump); it returns target.
func rsRestoreExact(t *testing.T, src, target string) string {
	t.Helper()
	r := snaptest.NewRepo(t)
	m := r.SnapshotOf(t, src)
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target}); err != nil {
		t.Fatal(err)
	}
	if want, got := snaptest.Dump(t, src, true), snaptest.Dump(t, target, true); want != got {
		t.Fatalf("restored tree differs\nsource:\n%s\nrestored:\n%s", want, got)
	}
	return target
}

// rsProfileDir saves, in the sensitive tier of r, a browser profile
// directory holding one file, name, with data, and returns its subtree.
func rsProfileDir(t *testing.T, r *snaptest.Repo, name string, data []byte) []blob.ID {
	t.Helper()
	id, _, err := r.SaveBlob(t.Context(), blob.Sensitive, blob.Data, data)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := snapshot.SaveDir(t.Context(), r, blob.Sensitive, []snapshot.Node{{Name: []byte(name), Type: snapshot.TypeFile, Mode: 0o600,
		MtimeNs: snaptest.Mtime, Size: uint64(len(data)), Content: []blob.ID{id}}})
	if err != nil {
		t.Fatal(err)
	}
	return prof
}
