package restore

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/snapshot"
)

func TestSafeSplitLinkPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string // nil: refused
	}{
		{"a", []string{"a"}},
		{"a/b/c", []string{"a", "b", "c"}},
		{"a\xff/b", []string{"a\xff", "b"}},
		{"", nil}, {"/etc/passwd", nil}, {"../x", nil}, {"a/../b", nil}, {"a/./b", nil},
		{"a//b", nil}, {"a/", nil}, {".", nil}, {"a\x00b", nil},
	} {
		got, err := safeSplitLinkPath([]byte(tc.in))
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q accepted as %q", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestSafeSplitInclude(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{"src", []string{"src"}, false},
		{"/src/", []string{"src"}, false},
		{"./src//lib", []string{"src", "lib"}, false},
		{"/", nil, false},
		{".", nil, false},
		{"src/../etc", nil, true},
		{"..", nil, true},
		{"a\x00b", nil, true},
	} {
		got, err := snapshot.SplitPath(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v", tc.in, got, err)
		}
	}
}

func TestSafeComparePaths(t *testing.T) {
	t.Parallel()
	// Depth-first name order: a parent before its children, and "a/z"
	// before "a0" although "a/" > "a0" as strings would say otherwise.
	order := []string{"a", "a/b", "a/z", "a0", "b"}
	for i := range order {
		for j := range order {
			got := safeComparePaths(strings.Split(order[i], "/"), strings.Split(order[j], "/"))
			if (got < 0) != (i < j) || (got == 0) != (i == j) {
				t.Errorf("compare(%q, %q) = %d", order[i], order[j], got)
			}
		}
	}
}

// TestSafeDirsNeverFollowSymlinks: even if a plan let a symlink stand
// where a directory is expected, the descriptor walk refuses to go
// through it, so nothing is created outside the staging directory.
func TestSafeDirsNeverFollowSymlinks(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	outside, check := rsSentinel(t, base)
	stagingPath := filepath.Join(base, "staging")
	if err := os.Mkdir(stagingPath, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(stagingPath, "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(stagingPath, "up")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(stagingPath, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// Entries: 0 the root, 1 "evil", 2 "evil/sub", 3 "up".
	names := []string{"", "evil", "sub", "up"}
	parents := []int32{-1, 0, 1, 0}
	d := newSafeDirs(fd, func(i int32) (int32, string) { return parents[i], names[i] }, 2)
	defer d.close()
	for _, dir := range []int32{1, 2, 3} {
		if dfd, err := d.get(dir); err == nil {
			_ = unix.Mkdirat(dfd, "pwned", 0o700)
			d.put(dir)
			t.Errorf("directory %d: got a descriptor through a symlink", dir)
		} else if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
			t.Errorf("directory %d: %v, want ENOTDIR or ELOOP", dir, err)
		}
	}
	// A file is not created through a symlinked name either.
	if _, err := safeOpenAt(fd, "evil", unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600); !errors.Is(err, unix.EEXIST) {
		t.Errorf("O_CREAT|O_EXCL on a symlink: %v", err)
	}
	if _, err := safeOpenAt(fd, "evil", unix.O_RDONLY, 0); !errors.Is(err, unix.ELOOP) {
		t.Errorf("open of a symlink: %v", err)
	}
	check()
}

// TestSafeDirsCache opens more directories than the cache keeps and
// checks descriptors stay valid while held and are all closed at the end.
func TestSafeDirsCache(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	const n = 20
	names := []string{""}
	parents := []int32{-1}
	p := base
	for i := 1; i <= n; i++ {
		p = filepath.Join(p, "d")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		names = append(names, "d")
		parents = append(parents, int32(i-1))
	}
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	d := newSafeDirs(fd, func(i int32) (int32, string) { return parents[i], names[i] }, 3)
	held, err := d.get(n)
	if err != nil {
		t.Fatal(err)
	}
	for i := int32(n - 1); i >= 1; i-- {
		if _, err := d.get(i); err != nil {
			t.Fatal(err)
		}
		d.put(i)
	}
	if err := unix.Mkdirat(held, "leaf", 0o700); err != nil {
		t.Errorf("held descriptor closed under us: %v", err)
	}
	d.put(n)
	if len(d.open) > 3 || d.idle.Len() > 3 {
		t.Errorf("%d descriptors open, %d idle; cache max 3", len(d.open), d.idle.Len())
	}
	d.close()
	if len(d.open) != 0 {
		t.Errorf("%d descriptors left open", len(d.open))
	}
	if _, err := os.Stat(filepath.Join(p, "leaf")); err != nil {
		t.Error(err)
	}
}

// FuzzRestorePlan feeds arbitrary tree bytes to the restore planner: it
// must not panic, and whatever it accepts has only valid names and hard
// links to earlier regular files.
func FuzzRestorePlan(f *testing.F) {
	for _, nodes := range [][]snapshot.Node{
		{{Name: []byte("a"), Type: snapshot.TypeFile}, {Name: []byte("b"), Type: snapshot.TypeHardlink, LinkPath: []byte("a")}},
		{{Name: []byte("d"), Type: snapshot.TypeDir, Subtree: []blob.ID{{2}}}, {Name: []byte("s"), Type: snapshot.TypeSymlink, LinkTarget: []byte("/x")}},
		{{Name: []byte(".."), Type: snapshot.TypeFile}},
		{{Name: []byte("z"), Type: snapshot.TypeHardlink, LinkPath: []byte("../../etc/passwd")}},
	} {
		b, _ := json.Marshal(snapshot.Tree{Version: snapshot.TreeVersion, Nodes: nodes})
		f.Add(b, []byte(`{"version":1,"nodes":[{"name":"eA==","type":"file","mode":420,"mtime_ns":0}]}`))
	}
	f.Fuzz(func(t *testing.T, root, sub []byte) {
		l := rsFakeLoader{{1}: root, {2}: sub}
		m := &snapshot.Manifest{Root: snapshot.Node{Type: snapshot.TypeDir, Subtree: []blob.ID{{1}}}}
		plan, err := rsPlanTree(context.Background(), l, blob.Workspace, m, nil)
		if err != nil {
			return
		}
		seen := map[string]int32{}
		for i, e := range plan.entries[1:] {
			if snapshot.ValidName([]byte(e.name)) != nil || strings.Contains(e.name, "/") {
				t.Fatalf("accepted entry %q", e.name)
			}
			if e.link >= 0 {
				tgt := plan.entries[e.link]
				if tgt.node.Type != snapshot.TypeFile || int(e.link) > i || seen[tgt.path] != e.link {
					t.Fatalf("hard link %q to %q accepted", e.path, tgt.path)
				}
			}
			if e.node.Type == snapshot.TypeFile {
				seen[e.path] = int32(i + 1)
			}
		}
	})
}
