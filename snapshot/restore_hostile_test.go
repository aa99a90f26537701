package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/blob"
	"lifeboat/repo"
)

// TestRestoreRefusesHostile restores hand-crafted hostile snapshots. Each
// must fail with ErrUnsafeEntry and an error naming the entry, leave no
// target and no staging directory, and leave a sentinel directory next to
// the target (and one the manifest points at) byte-for-byte unchanged.
func TestRestoreRefusesHostile(t *testing.T) {
	r := newRestoreRepo(t)
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	_, checkOutside := rsSentinel(t, outside)
	outsideSentinel := filepath.Join(outside, "sentinel")
	ok := r.file(t, "ok", []byte("an ordinary file"))
	link := func(name, lp string) Node {
		return Node{Name: []byte(name), Type: TypeHardlink, LinkPath: []byte(lp)}
	}
	sym := func(name, target string) Node {
		return Node{Name: []byte(name), Type: TypeSymlink, LinkTarget: []byte(target)}
	}
	named := func(name string) Node { n := ok; n.Name = []byte(name); return n }
	cases := []struct {
		name  string
		root  Node
		entry string // must appear in the error
	}{
		{"dotdot", r.dir(t, "root", ok, named("..")), `".."`},
		{"dot", r.dir(t, "root", named("."), ok), `"."`},
		{"empty name", r.dir(t, "root", r.dir(t, "sub", named(""))), `"sub"`},
		{"slash", r.dir(t, "root", named("a/b")), `"a/b"`},
		{"NUL", r.dir(t, "root", named("a\x00b")), `"a\x00b"`},
		{"dotdot deeper", r.dir(t, "root", r.dir(t, "d", r.dir(t, "e", named("..")))), `"d/e"`},
		{"symlink out, then a file under it", r.dir(t, "root",
			Node{Name: []byte("evil"), Type: TypeSymlink, LinkTarget: []byte(outsideSentinel), Subtree: r.dir(t, "x", r.file(t, "x", []byte("pwned"))).Subtree}), `"evil"`},
		{"symlink and directory of the same name", r.rawDir(t, "root",
			sym("evil", outsideSentinel), r.dir(t, "evil", r.file(t, "x", []byte("pwned")))), `"evil"`},
		{"symlink to .., then a hard link through it", r.dir(t, "root",
			ok, sym("up", ".."), link("z", "up/outside/sentinel/f")), `"z"`},
		{"hard link through an absolute symlink", r.dir(t, "root",
			sym("evil", outsideSentinel), link("z", "evil/f")), `"z"`},
		{"hard link ../../etc/passwd", r.dir(t, "root", ok, link("z", "../../etc/passwd")), `"z"`},
		{"hard link /etc/passwd", r.dir(t, "root", ok, link("z", "/etc/passwd")), `"z"`},
		{"hard link ok/../ok", r.dir(t, "root", ok, link("z", "ok/../ok")), `"z"`},
		{"hard link to a later file", r.dir(t, "root", link("a", "ok"), ok), `"a"`},
		{"hard link to itself", r.dir(t, "root", ok, link("z", "z")), `"z"`},
		{"hard link to a missing path", r.dir(t, "root", ok, link("z", "nothere")), `"z"`},
		{"hard link to a directory", r.dir(t, "root", r.dir(t, "d"), link("z", "d")), `"z"`},
		{"hard link to a symlink", r.dir(t, "root", sym("s", "ok"), link("z", "s")), `"z"`},
		{"hard link to a hard link", r.dir(t, "root", ok, link("p", "ok"), link("q", "p")), `"q"`},
		{"duplicate names", r.rawDir(t, "root", ok, ok), `"ok"`},
		{"unsorted names", r.rawDir(t, "root", named("b"), named("a")), `"a"`},
		{"duplicate across tree blobs", r.twoBlobDir(t, []Node{named("a"), named("b")}, []Node{named("b")}), `"b"`},
		{"device carrying content", r.dir(t, "root", Node{Name: []byte("dev"), Type: TypeDevice, Content: ok.Content}), `"dev"`},
		{"file carrying a subtree", r.dir(t, "root", Node{Name: []byte("f"), Type: TypeFile, Subtree: r.dir(t, "x").Subtree}), `"f"`},
		{"file size does not match its chunks", r.dir(t, "root", Node{Name: []byte("f"), Type: TypeFile, Size: 1, Content: ok.Content}), `"f"`},
		{"security.capability xattr", r.dir(t, "root", Node{Name: []byte("f"), Type: TypeFile, Xattrs: []Xattr{{Name: "security.capability", Value: []byte{1}}}}), `"f"`},
		{"trusted xattr on a directory", r.dir(t, "root", Node{Name: []byte("d"), Type: TypeDir, Subtree: r.dir(t, "x").Subtree, Xattrs: []Xattr{{Name: "trusted.overlay.opaque", Value: []byte("y")}}}), `"d"`},
		{"unknown type", r.dir(t, "root", Node{Name: []byte("w"), Type: "whiteout"}), `"w"`},
		{"mode bits beyond 07777", r.dir(t, "root", Node{Name: []byte("f"), Type: TypeFile, Mode: 0o170000}), `"f"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(base, strings.ReplaceAll(tc.name, "/", "_"))
			if err := os.Mkdir(parent, 0o755); err != nil {
				t.Fatal(err)
			}
			_, check := rsSentinel(t, parent)
			target := filepath.Join(parent, "target")
			m := r.manifest(t, tc.root, false)
			_, err := Restore(context.Background(), r.Repository, m, RestoreOptions{Target: target})
			t.Logf("error: %v", err)
			if !errors.Is(err, ErrUnsafeEntry) {
				t.Fatalf("got %v, want ErrUnsafeEntry", err)
			}
			var re *RestoreError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.entry) {
				t.Errorf("error does not name the entry %s: %v", tc.entry, err)
			}
			if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("target exists after a refused restore: %v", err)
			}
			if l := rsLeftovers(t, parent); len(l) > 0 {
				t.Errorf("left behind: %v", l)
			}
			check()
			checkOutside()
		})
	}
}

// twoBlobDir is a directory listed by two tree blobs, each saved as given.
func (r *rsRepo) twoBlobDir(t *testing.T, a, b []Node) Node {
	d1, d2 := r.rawDir(t, "x", a...), r.rawDir(t, "x", b...)
	return Node{Name: []byte("root"), Type: TypeDir, Mode: 0o755, Subtree: []blob.ID{d1.Subtree[0], d2.Subtree[0]}}
}

// TestRestoreSymlinkNotFollowed restores symlinks that point at a
// sentinel outside the target, with metadata of their own, followed by
// entries sorted after them: nothing reaches the sentinel.
func TestRestoreSymlinkNotFollowed(t *testing.T) {
	r := newRestoreRepo(t)
	base := t.TempDir()
	sentinel, check := rsSentinel(t, base)
	root := r.dir(t, "root",
		Node{Name: []byte("a"), Type: TypeSymlink, LinkTarget: []byte(sentinel), MtimeNs: 5, UID: 999, GID: 999},
		Node{Name: []byte("b"), Type: TypeSymlink, LinkTarget: []byte(filepath.Join(sentinel, "f")), MtimeNs: 5, UID: 999, GID: 999},
		Node{Name: []byte("c"), Type: TypeSymlink, LinkTarget: []byte("../sentinel/sub"), MtimeNs: 5},
		r.dir(t, "d", r.file(t, "f", []byte("not in the sentinel"))),
		r.file(t, "e", []byte("nor here")),
	)
	m := r.manifest(t, root, true)
	target := filepath.Join(base, "target")
	if _, err := Restore(t.Context(), r.Repository, m, RestoreOptions{Target: target}); err != nil {
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
	r := newRestoreRepo(t)
	root := r.dir(t, "root",
		Node{Name: []byte("console"), Type: TypeDevice, Mode: 0o666},
		r.file(t, "f", []byte("kept")),
		Node{Name: []byte("s"), Type: TypeSocket},
	)
	m := r.manifest(t, root, true)
	target := filepath.Join(t.TempDir(), "target")
	prog := &rsProgress{}
	res, err := Restore(t.Context(), r.Repository, m, RestoreOptions{Target: target, Progress: prog})
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
	var a, b blob.ID
	a[0], b[0] = 1, 2
	l := rsFakeLoader{
		a: rsMustEncode(t, []Node{{Name: []byte("d"), Type: TypeDir, Subtree: []blob.ID{b}}}),
		b: rsMustEncode(t, []Node{{Name: []byte("e"), Type: TypeDir, Subtree: []blob.ID{a}}}),
	}
	m := &Manifest{Root: Node{Type: TypeDir, Subtree: []blob.ID{a}}}
	_, err := rsPlanTree(t.Context(), l, blob.Workspace, m, nil)
	if !errors.Is(err, ErrUnsafeEntry) || !strings.Contains(err.Error(), `"d/e"`) {
		t.Errorf("cycle: %v", err)
	}
	delete(l, b)
	_, err = rsPlanTree(t.Context(), l, blob.Workspace, m, nil)
	if !errors.Is(err, repo.ErrBlobNotFound) || !strings.Contains(err.Error(), `"d"`) {
		t.Errorf("missing tree: %v", err)
	}
}

type rsFakeLoader map[blob.ID][]byte

func (l rsFakeLoader) LoadBlob(_ context.Context, _ blob.Tier, _ blob.Type, id blob.ID, _ []byte) ([]byte, error) {
	b, ok := l[id]
	if !ok {
		return nil, repo.ErrBlobNotFound
	}
	return b, nil
}

func rsMustEncode(t *testing.T, nodes []Node) []byte {
	b, err := EncodeTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestoreSubtreeBomb: a tree that lists one subtree twice per level
// expands to 2^depth entries. The plan stops at the manifest's totals.
func TestRestoreSubtreeBomb(t *testing.T) {
	l := rsFakeLoader{}
	var leaf blob.ID
	leaf[0] = 1
	l[leaf] = rsMustEncode(t, []Node{{Name: []byte("f"), Type: TypeFile, Mode: 0o644}})
	id := leaf
	for level := range 40 {
		var next blob.ID
		next[0], next[1] = 2, byte(level)
		l[next] = rsMustEncode(t, []Node{{Name: []byte("a"), Type: TypeDir, Mode: 0o755, Subtree: []blob.ID{id}},
			{Name: []byte("b"), Type: TypeDir, Mode: 0o755, Subtree: []blob.ID{id}}})
		id = next
	}
	m := &Manifest{Root: Node{Type: TypeDir, Mode: 0o755, Subtree: []blob.ID{id}}, Totals: Totals{Files: 1000, Dirs: 1000}}
	_, err := rsPlanTree(t.Context(), l, blob.Workspace, m, nil)
	if !errors.Is(err, ErrUnsafeEntry) || !strings.Contains(err.Error(), "2000 entries its manifest declares") {
		t.Fatalf("subtree bomb: %v", err)
	}
}
