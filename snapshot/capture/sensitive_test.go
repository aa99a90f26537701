package capture

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/repotest"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
	"lifeboat/snapshot/restore"
)

// sensTestTree writes a workspace with a "profile" below home/.cfg.
func sensTestTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "ws")
	capTestWrite(t, src, map[string]string{
		"readme.txt":                      "workspace file",
		"home/.cfg/other.txt":             "not sensitive",
		"home/.cfg/prof/Cookies":          "secret-cookie-value",
		"home/.cfg/prof/Default/Login":    "secret-password",
		"home/.cfg/prof/Cache/data_0":     "cache bytes",
		"home/.cfg/prof/Default/Cache/x":  "nested cache",
		"home/.cfg/prof/Default/keep.txt": "kept",
	})
	capTestAge(t, src)
	return src
}

func sensTestSpec() SensitiveSpec {
	return SensitiveSpec{Path: "home/.cfg/prof", Kind: "test", Filter: func(rel string) bool {
		return filepath.Base(rel) != "Cache"
	}}
}

// sensTestKeyRepo opens tr with a new key of the given tiers.
func sensTestKeyRepo(t *testing.T, tr *capTestRepo, r *repo.Repository, tiers []blob.Tier) *repo.Repository {
	t.Helper()
	ctx := context.Background()
	pw := []byte("key " + tiers[len(tiers)-1].String())
	if _, err := r.AddKey(ctx, pw, tiers, repotest.KDF()); err != nil {
		t.Fatal(err)
	}
	be, err := local.Open(tr.dir)
	if err != nil {
		t.Fatal(err)
	}
	return capTestOpenBackend(t, be, pw, t.TempDir())
}

// sensTestOptions are capture options that put sensTestSpec's profile
// into the sensitive tier.
func sensTestOptions() Options {
	o := capTestOptions(nil)
	o.Sensitive = []SensitiveSpec{sensTestSpec()}
	return o
}

// sensTestSetup is a sensitive-tier test's start: a repository (tr,
// opened as r), the tree of sensTestTree and sensTestOptions.
func sensTestSetup(t *testing.T) (*capTestRepo, *repo.Repository, string, Options) {
	t.Helper()
	tr := newCapTestRepo(t)
	return tr, tr.open(t), sensTestTree(t), sensTestOptions()
}

func TestCaptureSensitiveTreeRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r, src, o := sensTestSetup(t)
	m := capTestCapture(t, r, src, o)
	if m.Sensitive == nil || !m.Complete {
		t.Fatalf("manifest sensitive=%v complete=%v", m.Sensitive, m.Complete)
	}
	// The workspace tree holds nothing of the profile, and counts nothing of it.
	ws := capTestFlatten(t, r, m.Root.Subtree)
	for p := range ws {
		if strings.HasPrefix(p, "home/.cfg/prof") {
			t.Errorf("workspace tree lists %s", p)
		}
	}
	if ws["home/.cfg/other.txt"] == nil || ws["readme.txt"] == nil {
		t.Fatalf("workspace tree lacks workspace files: %v", ws)
	}
	if m.Totals.Files != 2 {
		t.Errorf("workspace totals count %d files, want 2", m.Totals.Files)
	}
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(part.Trees) != 1 || part.Trees[0].Path != "home/.cfg/prof" || part.Trees[0].Totals.Files != 3 {
		t.Fatalf("part %+v", part.Trees)
	}
	// The profile's chunks and trees are sensitive blobs only.
	err = snapshot.LoadDir(ctx, r, blob.Sensitive, part.Trees[0].Root.Subtree, func(n *snapshot.Node) error {
		for _, id := range n.Content {
			if _, ok, _ := r.LookupBlob(blob.Sensitive, blob.Data, id); !ok {
				t.Errorf("%s: chunk not in the sensitive tier", n.Name)
			}
			if _, ok, _ := r.LookupBlob(blob.Workspace, blob.Data, id); ok {
				t.Errorf("%s: chunk id found in the workspace tier", n.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "out")
	res, err := restore.Run(ctx, r, m, restore.Options{Target: dst, Grafts: part.Grafts()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 5 {
		t.Errorf("restored %d files, want 5", res.Files)
	}
	for _, p := range []string{"home/.cfg/prof/Cache", "home/.cfg/prof/Default/Cache"} {
		if err := os.RemoveAll(filepath.Join(src, p)); err != nil {
			t.Fatal(err)
		}
	}
	// RemoveAll moved the directories' mtimes: compare without them, then
	// the parent of the graft with them.
	if got, want := snaptest.Dump(t, dst, false), snaptest.Dump(t, src, false); got != want {
		t.Fatalf("restored tree differs:\n got %s\nwant %s", got, want)
	}
	stSrc, _ := os.Stat(filepath.Join(src, "home/.cfg"))
	stDst, _ := os.Stat(filepath.Join(dst, "home/.cfg"))
	if !stSrc.ModTime().Equal(stDst.ModTime()) {
		t.Errorf("graft parent mtime %v, want %v", stDst.ModTime(), stSrc.ModTime())
	}
}

func TestSensitivePartWorkspaceOnlyKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr, r, src, o := sensTestSetup(t)
	m := capTestCapture(t, r, src, o)
	wr := sensTestKeyRepo(t, tr, r, []blob.Tier{blob.Workspace})

	m2, err := snapshot.LoadManifest(ctx, wr, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Sensitive == nil {
		t.Fatal("a workspace-only key does not see that a sensitive part exists")
	}
	_, err = snapshot.LoadSensitivePart(ctx, wr, m2)
	if !errors.Is(err, snapshot.ErrSensitiveLocked) || !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("LoadSensitivePart with a workspace-only key: %v", err)
	}
	// Grafting a sensitive tree with this key is refused before anything is written.
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if _, err := restore.Run(ctx, wr, m2, restore.Options{Target: dst, Grafts: part.Grafts()}); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("graft with a workspace-only key: %v", err)
	}
	if _, err := os.Lstat(dst); !os.IsNotExist(err) {
		t.Fatalf("failed restore left the target: %v", err)
	}
	// The workspace files restore.
	if _, err := restore.Run(ctx, wr, m2, restore.Options{Target: dst}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, "home/.cfg/other.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "home/.cfg/prof")); !os.IsNotExist(err) {
		t.Fatalf("profile directory restored with a workspace-only key: %v", err)
	}
	// Capturing profiles needs the sensitive tier.
	o.Sensitive = []SensitiveSpec{sensTestSpec()}
	if _, err := Run(ctx, wr, src, o); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("capture of a sensitive tree with a workspace-only key: %v", err)
	}
}

func TestSensitivePartIDsDiffer(t *testing.T) {
	t.Parallel()
	r := capTestOpenRepo(t)
	src := sensTestTree(t)
	o := sensTestOptions()
	a := capTestCapture(t, r, src, o)
	b := capTestCapture(t, r, src, o)
	if *a.Sensitive == *b.Sensitive {
		t.Fatal("two snapshots of an unchanged profile share the sensitive part id: a workspace key could tell the profile did not change")
	}
	if a.Root.Subtree[0] != b.Root.Subtree[0] {
		t.Fatal("unchanged workspace trees differ")
	}
}

func TestSensitiveSpecRefused(t *testing.T) {
	t.Parallel()
	r := capTestOpenRepo(t)
	src := sensTestTree(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "Cookies"), []byte("outside secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "home"), filepath.Join(src, "homelink")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"linked", "homelink/.cfg/prof", "../x", "", "/", "readme.txt", "missing", "home/.cfg/prof/../../.."} {
		o := capTestOptions(nil)
		o.Sensitive = []SensitiveSpec{{Path: p}}
		if _, err := Run(context.Background(), r, src, o); !errors.Is(err, ErrSensitivePath) {
			t.Errorf("sensitive path %q: %v", p, err)
		}
	}
	o := capTestOptions(nil)
	o.Sensitive = []SensitiveSpec{{Path: "home/.cfg"}, {Path: "home/.cfg/prof"}}
	if _, err := Run(context.Background(), r, src, o); !errors.Is(err, ErrSensitivePath) {
		t.Errorf("nested sensitive paths: %v", err)
	}
}

func TestGraftRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := capTestOpenRepo(t)
	src := sensTestTree(t)
	o := sensTestOptions()
	m := capTestCapture(t, r, src, o)
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		t.Fatal(err)
	}
	// A graft onto an entry the workspace tree has: refused, target untouched.
	g := part.Grafts()
	g[0].Path = "home/.cfg/other.txt"
	dst := filepath.Join(t.TempDir(), "out")
	if _, err := restore.Run(ctx, r, m, restore.Options{Target: dst, Grafts: g}); err == nil || !strings.Contains(err.Error(), "home/.cfg/other.txt") {
		t.Fatalf("graft onto an existing entry: %v", err)
	}
	g[0].Path = "../escape"
	if _, err := restore.Run(ctx, r, m, restore.Options{Target: dst, Grafts: g}); !errors.Is(err, snapshot.ErrUnsafeEntry) {
		t.Fatalf("graft path with ..: %v", err)
	}
	// A validation callback's error aborts before the switch.
	boom := errors.New("validation failed")
	var saw string
	_, err = restore.Run(ctx, r, m, restore.Options{Target: dst, Grafts: part.Grafts(), Validate: func(_ context.Context, staging string) error {
		b, err := os.ReadFile(filepath.Join(staging, "home/.cfg/prof/Cookies"))
		saw = string(b)
		if err != nil {
			return err
		}
		return boom
	}})
	if !errors.Is(err, boom) || saw != "secret-cookie-value" {
		t.Fatalf("validate: err %v, saw %q", err, saw)
	}
	if _, err := os.Lstat(dst); !os.IsNotExist(err) {
		t.Fatalf("aborted restore left the target: %v", err)
	}
	if left := snaptest.Leftovers(t, filepath.Dir(dst)); len(left) != 0 {
		t.Fatalf("leftovers %v", left)
	}
}

// TestCheckSnapshotsSensitive: check walks the sensitive trees with a key
// that has the tier, and reports damage under the profile's path.
func TestCheckSnapshotsSensitive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newCapTestRepo(t)
	r := tr.open(t)
	o := sensTestOptions()
	m := capTestCapture(t, r, sensTestTree(t), o)
	if n, probs, err := snapshot.CheckSnapshots(ctx, r, nil); err != nil || n != 1 || len(probs) != 0 {
		t.Fatalf("check: %d %v %v", n, probs, err)
	}
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		t.Fatal(err)
	}
	var pack blob.ID
	err = snapshot.LoadDir(ctx, r, blob.Sensitive, part.Trees[0].Root.Subtree, func(n *snapshot.Node) error {
		if string(n.Name) == "Cookies" {
			loc, _, err := r.LookupBlob(blob.Sensitive, blob.Data, n.Content[0])
			pack = loc.Pack
			return err
		}
		return nil
	})
	if err != nil || pack.IsNull() {
		t.Fatalf("finding the pack of Cookies: %v", err)
	}
	_, probs, err := snapshot.CheckSnapshots(ctx, r, map[blob.ID]bool{pack: true})
	if err != nil {
		t.Fatal(err)
	}
	var hit bool
	for _, p := range probs {
		if p.Kind == "file_damaged" && strings.HasSuffix(p.Object, ":/home/.cfg/prof/Cookies") {
			hit = true
		}
	}
	if !hit {
		t.Fatalf("damage in a sensitive pack not reported under the profile path: %v", probs)
	}
	// A workspace-only key checks the workspace trees and passes.
	wr := sensTestKeyRepo(t, tr, r, []blob.Tier{blob.Workspace})
	if _, probs, err := snapshot.CheckSnapshots(ctx, wr, nil); err != nil || len(probs) != 0 {
		t.Fatalf("check with a workspace-only key: %v %v", probs, err)
	}
}

// Only the sensitive paths themselves leave the workspace tree: a
// profile at the root and one nested, beside entries of the same names
// elsewhere, and a user Filter still applies to the rest.
func TestCaptureSensitiveOmitsExactPaths(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "ws")
	capTestWrite(t, src, map[string]string{
		"prof/Cookies":       "secret 1",
		"a/b/prof/Cookies":   "secret 2",
		"a/prof/kept.txt":    "same name, other place",
		"a/b/prof2/kept.txt": "longer name",
		"prof.txt":           "same prefix",
		"a/b/skip.log":       "filtered by the user",
		"keep.txt":           "kept",
	})
	capTestAge(t, src)
	r := newCapTestRepo(t).open(t)
	o := capTestOptions(nil)
	o.Sensitive = []SensitiveSpec{{Path: "prof"}, {Path: "a/b/prof"}}
	o.Filter = func(rel string) bool { return !strings.HasSuffix(rel, ".log") }
	m := capTestCapture(t, r, src, o)
	ws := capTestFlatten(t, r, m.Root.Subtree)
	for _, p := range []string{"prof", "prof/Cookies", "a/b/prof", "a/b/prof/Cookies", "a/b/skip.log"} {
		if ws[p] != nil {
			t.Errorf("workspace tree lists %s", p)
		}
	}
	for _, p := range []string{"a/prof/kept.txt", "a/b/prof2/kept.txt", "prof.txt", "keep.txt"} {
		if ws[p] == nil {
			t.Errorf("workspace tree lacks %s", p)
		}
	}
	part, err := snapshot.LoadSensitivePart(context.Background(), r, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(part.Trees) != 2 {
		t.Errorf("sensitive part holds %d trees, want 2", len(part.Trees))
	}
}
