package restore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/seedtest"
	"lifeboat/snapshot/internal/snaptest"
)

// TestRestoreRandomTrees is the property test: random trees (seed logged;
// -seed replays them, and a round is named after its own seed, so
// -seed=<its name> replays that round first) captured by hand and
// restored compare equal in content and metadata.
func TestRestoreRandomTrees(t *testing.T) {
	t.Parallel()
	seed := seedtest.Seed(t)
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for i := range rounds {
		seed := seed + uint64(i)
		t.Run(fmt.Sprintf("%#x", seed), func(t *testing.T) {
			rng := seedtest.New(seed)
			base := t.TempDir()
			src := filepath.Join(base, "src")
			g := &rsTreeGen{t: t, rng: rng}
			g.dir(src, 0)
			g.finish()
			r := snaptest.NewRepo(t)
			m := r.SnapshotOf(t, src)
			target := filepath.Join(base, "target")
			workers := 1 + rng.IntN(8)
			res, err := Run(t.Context(), r.Repository, m, Options{Target: target, Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d files, %d dirs, %d bytes, %d workers", res.Files, res.Dirs, res.Bytes, workers)
			if want, got := snaptest.Dump(t, src, true), snaptest.Dump(t, target, true); want != got {
				t.Fatalf("restored tree differs (workers %d)\nsource:\n%s\nrestored:\n%s", workers, want, got)
			}
		})
	}
}

// rsTreeGen writes a random tree.
type rsTreeGen struct {
	t     *testing.T
	rng   *rand.Rand
	files []string // regular files so far, for hard links
	blobs [][]byte // earlier contents, reused for dedup
	paths []string // everything, for metadata
}

func (g *rsTreeGen) must(err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}

func (g *rsTreeGen) name(used map[string]bool) string {
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789._- \xff\xfe\xc3"
	for {
		b := make([]byte, 1+g.rng.IntN(12))
		for i := range b {
			b[i] = alpha[g.rng.IntN(len(alpha))]
		}
		s := string(b)
		if s != "." && s != ".." && !used[s] {
			used[s] = true
			return s
		}
	}
}

func (g *rsTreeGen) content() []byte {
	switch g.rng.IntN(6) {
	case 0:
		return nil
	case 1:
		if len(g.blobs) > 0 { // a copy of an earlier file: dedup across files
			return g.blobs[g.rng.IntN(len(g.blobs))]
		}
	case 2: // zeros with some data: holes inside chunks
		b := make([]byte, 1+g.rng.IntN(3<<20))
		at := g.rng.IntN(len(b))
		rsRandom(b[at:min(len(b), at+4096)], g.rng.Uint64())
		return b
	case 3: // compressible
		return bytes.Repeat([]byte("line of text "+strconv.Itoa(g.rng.IntN(100))+"\n"), 1+g.rng.IntN(50000))
	}
	b := make([]byte, g.rng.IntN(1<<20))
	rsRandom(b, g.rng.Uint64())
	return b
}

func (g *rsTreeGen) dir(p string, depth int) {
	g.must(os.Mkdir(p, 0o755))
	g.paths = append(g.paths, p)
	used := map[string]bool{}
	n := g.rng.IntN(9)
	if depth < 2 {
		n += 8
	}
	for range n {
		q := filepath.Join(p, g.name(used))
		switch k := g.rng.IntN(10); {
		case k < 2 && depth < 4:
			g.dir(q, depth+1)
			continue
		case k < 6:
			data := g.content()
			g.must(os.WriteFile(q, data, 0o600))
			g.files = append(g.files, q)
			g.blobs = append(g.blobs, data)
		case k < 7 && len(g.files) > 0:
			g.must(os.Link(g.files[g.rng.IntN(len(g.files))], q))
			continue // shares the first name's metadata
		case k < 8:
			g.must(os.Symlink(g.name(map[string]bool{}), q))
		case k < 9:
			g.must(unix.Mkfifo(q, 0o600))
		default:
			g.must(os.WriteFile(q, nil, 0o600))
		}
		g.paths = append(g.paths, q)
	}
}

// finish gives every entry random metadata, deepest first.
func (g *rsTreeGen) finish() {
	modes := []uint32{0o644, 0o600, 0o755, 0o700, 0o4755, 0o2750, 0o1777, 0o444, 0o500, 0o000}
	paths := slices.Clone(g.paths)
	slices.Reverse(paths)
	for _, p := range paths {
		var st unix.Stat_t
		g.must(unix.Lstat(p, &st))
		isLink := st.Mode&unix.S_IFMT == unix.S_IFLNK
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if os.Geteuid() == 0 {
			g.must(unix.Lchown(p, g.rng.IntN(70000), g.rng.IntN(70000)))
		}
		if !isLink && (isDir || st.Mode&unix.S_IFMT == unix.S_IFREG) && g.rng.IntN(3) == 0 {
			g.must(unix.Lsetxattr(p, "user.r"+strconv.Itoa(g.rng.IntN(3)), []byte(strconv.Itoa(g.rng.IntN(1e6))), 0))
		}
		if !isLink {
			mode := modes[g.rng.IntN(len(modes))]
			if os.Geteuid() != 0 { // the test must be able to walk and read it
				mode |= 0o400
				if isDir {
					mode |= 0o700
				}
			}
			g.must(unix.Chmod(p, mode))
		}
		ns := g.rng.Int64N(4e18)
		ts := []unix.Timespec{unix.NsecToTimespec(ns), unix.NsecToTimespec(ns)}
		g.must(unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}
