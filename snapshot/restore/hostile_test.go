package restore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// TestRestoreRefusesHostile restores hand-crafted hostile snapshots. Each
// must fail with ErrUnsafeEntry and an error naming the entry, leave no
// target and no staging directory, and leave a sentinel directory next to
// the target (and one the manifest points at) byte-for-byte unchanged.
func TestRestoreRefusesHostile(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	_, checkOutside := rsSentinel(t, outside)
	outsideSentinel := filepath.Join(outside, "sentinel")
	ok := r.File(t, "ok", []byte("an ordinary file"))
	link := func(name, lp string) snapshot.Node {
		return snapshot.Node{Name: []byte(name), Type: snapshot.TypeHardlink, LinkPath: []byte(lp)}
	}
	sym := func(name, target string) snapshot.Node {
		return snapshot.Node{Name: []byte(name), Type: snapshot.TypeSymlink, LinkTarget: []byte(target)}
	}
	named := func(name string) snapshot.Node { n := ok; n.Name = []byte(name); return n }
	cases := []struct {
		name  string
		root  snapshot.Node
		entry string // must appear in the error
	}{
		{"dotdot", r.Dir(t, "root", ok, named("..")), `".."`},
		{"dot", r.Dir(t, "root", named("."), ok), `"."`},
		{"empty name", r.Dir(t, "root", r.Dir(t, "sub", named(""))), `"sub"`},
		{"slash", r.Dir(t, "root", named("a/b")), `"a/b"`},
		{"NUL", r.Dir(t, "root", named("a\x00b")), `"a\x00b"`},
		{"dotdot deeper", r.Dir(t, "root", r.Dir(t, "d", r.Dir(t, "e", named("..")))), `"d/e"`},
		{"symlink out, then a file under it", r.Dir(t, "root",
			snapshot.Node{Name: []byte("evil"), Type: snapshot.TypeSymlink, LinkTarget: []byte(outsideSentinel), Subtree: r.Dir(t, "x", r.File(t, "x", []byte("pwned"))).Subtree}), `"evil"`},
		{"symlink and directory of the same name", r.RawDir(t, "root",
			sym("evil", outsideSentinel), r.Dir(t, "evil", r.File(t, "x", []byte("pwned")))), `"evil"`},
		{"symlink to .., then a hard link through it", r.Dir(t, "root",
			ok, sym("up", ".."), link("z", "up/outside/sentinel/f")), `"z"`},
		{"hard link through an absolute symlink", r.Dir(t, "root",
			sym("evil", outsideSentinel), link("z", "evil/f")), `"z"`},
		{"hard link ../../etc/passwd", r.Dir(t, "root", ok, link("z", "../../etc/passwd")), `"z"`},
		{"hard link /etc/passwd", r.Dir(t, "root", ok, link("z", "/etc/passwd")), `"z"`},
		{"hard link ok/../ok", r.Dir(t, "root", ok, link("z", "ok/../ok")), `"z"`},
		{"hard link to a later file", r.Dir(t, "root", link("a", "ok"), ok), `"a"`},
		{"hard link to itself", r.Dir(t, "root", ok, link("z", "z")), `"z"`},
		{"hard link to a missing path", r.Dir(t, "root", ok, link("z", "nothere")), `"z"`},
		{"hard link to a directory", r.Dir(t, "root", r.Dir(t, "d"), link("z", "d")), `"z"`},
		{"hard link to a symlink", r.Dir(t, "root", sym("s", "ok"), link("z", "s")), `"z"`},
		{"hard link to a hard link", r.Dir(t, "root", ok, link("p", "ok"), link("q", "p")), `"q"`},
		{"duplicate names", r.RawDir(t, "root", ok, ok), `"ok"`},
		{"unsorted names", r.RawDir(t, "root", named("b"), named("a")), `"a"`},
		{"duplicate across tree blobs", twoBlobDir(r, t, []snapshot.Node{named("a"), named("b")}, []snapshot.Node{named("b")}), `"b"`},
		{"device carrying content", r.Dir(t, "root", snapshot.Node{Name: []byte("dev"), Type: snapshot.TypeDevice, Content: ok.Content}), `"dev"`},
		{"file carrying a subtree", r.Dir(t, "root", snapshot.Node{Name: []byte("f"), Type: snapshot.TypeFile, Subtree: r.Dir(t, "x").Subtree}), `"f"`},
		{"file size does not match its chunks", r.Dir(t, "root", snapshot.Node{Name: []byte("f"), Type: snapshot.TypeFile, Size: 1, Content: ok.Content}), `"f"`},
		{"security.capability xattr", r.Dir(t, "root", snapshot.Node{Name: []byte("f"), Type: snapshot.TypeFile, Xattrs: []snapshot.Xattr{{Name: "security.capability", Value: []byte{1}}}}), `"f"`},
		{"trusted xattr on a directory", r.Dir(t, "root", snapshot.Node{Name: []byte("d"), Type: snapshot.TypeDir, Subtree: r.Dir(t, "x").Subtree, Xattrs: []snapshot.Xattr{{Name: "trusted.overlay.opaque", Value: []byte("y")}}}), `"d"`},
		{"unknown type", r.Dir(t, "root", snapshot.Node{Name: []byte("w"), Type: "whiteout"}), `"w"`},
		{"mode bits beyond 07777", r.Dir(t, "root", snapshot.Node{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o170000}), `"f"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(base, strings.ReplaceAll(tc.name, "/", "_"))
			if err := os.Mkdir(parent, 0o755); err != nil {
				t.Fatal(err)
			}
			_, check := rsSentinel(t, parent)
			target := filepath.Join(parent, "target")
			m := r.Manifest(t, tc.root, false)
			_, err := Run(context.Background(), r.Repository, m, Options{Target: target})
			t.Logf("error: %v", err)
			if !errors.Is(err, snapshot.ErrUnsafeEntry) {
				t.Fatalf("got %v, want ErrUnsafeEntry", err)
			}
			var re *Error
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.entry) {
				t.Errorf("error does not name the entry %s: %v", tc.entry, err)
			}
			if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("target exists after a refused restore: %v", err)
			}
			rsNoLeftovers(t, parent)
			check()
			checkOutside()
		})
	}
}

// twoBlobDir is a directory listed by two tree blobs, each saved as given.
func twoBlobDir(r *snaptest.Repo, t *testing.T, a, b []snapshot.Node) snapshot.Node {
	d1, d2 := r.RawDir(t, "x", a...), r.RawDir(t, "x", b...)
	return snapshot.Node{Name: []byte("root"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{d1.Subtree[0], d2.Subtree[0]}}
}

// TestRestoreSymlinkNotFollowed restores symlinks that point at a
// sentinel outside the target, with metadata of their own, followed by
// entries sorted after them: nothing reaches the sentinel.
func TestRestoreSymlinkNotFollowed(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	base := t.TempDir()
	sentinel, check := rsSentinel(t, base)
	root := r.Dir(t, "root",
		snapshot.Node{Name: []byte("a"), Type: snapshot.TypeSymlink, LinkTarget: []byte(sentinel), MtimeNs: 5, UID: 999, GID: 999},
		snapshot.Node{Name: []byte("b"), Type: snapshot.TypeSymlink, LinkTarget: []byte(filepath.Join(sentinel, "f")), MtimeNs: 5, UID: 999, GID: 999},
		snapshot.Node{Name: []byte("c"), Type: snapshot.TypeSymlink, LinkTarget: []byte("../sentinel/sub"), MtimeNs: 5},
		r.Dir(t, "d", r.File(t, "f", []byte("not in the sentinel"))),
		r.File(t, "e", []byte("nor here")),
	)
	m := r.Manifest(t, root, true)
	target := filepath.Join(base, "target")
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(filepath.Join(target, "a")); got != sentinel {
		t.Errorf("symlink a -> %q", got)
	}
	check()
}

// TestRestoreDeviceSkipped: device nodes and sockets are never created;
// the rest of the snapshot is restored and they are reported.
func TestRestoreDeviceSkipped(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	root := r.Dir(t, "root",
		snapshot.Node{Name: []byte("console"), Type: snapshot.TypeDevice, Mode: 0o666},
		r.File(t, "f", []byte("kept")),
		snapshot.Node{Name: []byte("s"), Type: snapshot.TypeSocket},
	)
	m := r.Manifest(t, root, true)
	target := filepath.Join(t.TempDir(), "target")
	prog := &rsProgress{}
	res, err := Run(t.Context(), r.Repository, m, Options{Target: target, Progress: prog})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 2 || res.Skipped[0] != "console" || res.Skipped[1] != "s" || len(prog.errs) != 2 {
		t.Errorf("skipped %q, reported %v", res.Skipped, prog.errs)
	}
	ents, _ := os.ReadDir(target)
	if len(ents) != 1 || ents[0].Name() != "f" {
		t.Errorf("target holds %v", ents)
	}
}

// TestRestoreTreeCycle feeds the planner a tree that lists its own
// ancestor (impossible to store in a content-addressed repository, so
// through a fake loader) and a missing tree.
func TestRestoreTreeCycle(t *testing.T) {
	t.Parallel()
	var a, b blob.ID
	a[0], b[0] = 1, 2
	l := rsFakeLoader{
		a: rsMustEncode(t, []snapshot.Node{{Name: []byte("d"), Type: snapshot.TypeDir, Subtree: []blob.ID{b}}}),
		b: rsMustEncode(t, []snapshot.Node{{Name: []byte("e"), Type: snapshot.TypeDir, Subtree: []blob.ID{a}}}),
	}
	m := &snapshot.Manifest{Root: snapshot.Node{Type: snapshot.TypeDir, Subtree: []blob.ID{a}}}
	_, err := rsPlanTree(t.Context(), l, blob.Workspace, m, nil)
	if !errors.Is(err, snapshot.ErrUnsafeEntry) || !strings.Contains(err.Error(), `"d/e"`) {
		t.Errorf("cycle: %v", err)
	}
	delete(l, b)
	_, err = rsPlanTree(t.Context(), l, blob.Workspace, m, nil)
	if !errors.Is(err, repo.ErrBlobNotFound) || !strings.Contains(err.Error(), `"d"`) {
		t.Errorf("missing tree: %v", err)
	}
}

// rsFakeLoader serves tree blobs from memory.
type rsFakeLoader = snaptest.Blobs

func rsMustEncode(t *testing.T, nodes []snapshot.Node) []byte {
	b, err := snapshot.EncodeTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestoreSubtreeBomb: a tree that lists one subtree twice per level
// expands to 2^depth entries. The plan stops at the manifest's totals.
func TestRestoreSubtreeBomb(t *testing.T) {
	t.Parallel()
	l := rsFakeLoader{}
	var leaf blob.ID
	leaf[0] = 1
	l[leaf] = rsMustEncode(t, []snapshot.Node{{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o644}})
	id := leaf
	for level := range 40 {
		var next blob.ID
		next[0], next[1] = 2, byte(level)
		l[next] = rsMustEncode(t, []snapshot.Node{{Name: []byte("a"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{id}},
			{Name: []byte("b"), Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{id}}})
		id = next
	}
	m := &snapshot.Manifest{Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o755, Subtree: []blob.ID{id}}, Totals: snapshot.Totals{Files: 1000, Dirs: 1000}}
	_, err := rsPlanTree(t.Context(), l, blob.Workspace, m, nil)
	if !errors.Is(err, snapshot.ErrUnsafeEntry) || !strings.Contains(err.Error(), "2000 entries its manifest declares") {
		t.Fatalf("subtree bomb: %v", err)
	}
}
