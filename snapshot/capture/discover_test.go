package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
	"lifeboat/snapshot/restore"
)

// capTestDiscoverer detects the directories that hold a regular file named
// MARK (kind "marked") and records what the capture asked it.
type capTestDiscoverer struct {
	mu       sync.Mutex
	asked    map[uint64]bool // inodes of the directories Detect was asked about
	checked  []string        // Check's paths, in call order
	prepared []string        // Prepare's paths, in call order
	refuse   string          // Check of this path fails with errCapTestRefused
	unready  string          // Prepare of this path fails with errCapTestRefused
	walked   func() bool     // reports whether the walk is over (at Prepare)
}

var errCapTestRefused = errors.New("refused by the test's discoverer")

func (d *capTestDiscoverer) Detect(dirfd int, names []string) (string, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		panic(err)
	}
	d.mu.Lock()
	if d.asked == nil {
		d.asked = map[uint64]bool{}
	}
	d.asked[st.Ino] = true
	d.mu.Unlock()
	if !slices.Contains(names, "MARK") {
		return "", false
	}
	err := unix.Fstatat(dirfd, "MARK", &st, unix.AT_SYMLINK_NOFOLLOW)
	return "marked", err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

func (d *capTestDiscoverer) Check(_ context.Context, path, kind string) error {
	if kind != "marked" {
		panic("kind " + kind)
	}
	d.checked = append(d.checked, path) // the walker's goroutine only
	if path == d.refuse {
		return fmt.Errorf("%s: %w", path, errCapTestRefused)
	}
	return nil
}

func (d *capTestDiscoverer) Prepare(_ context.Context, path, kind string) (func(string) bool, error) {
	if kind != "marked" {
		panic("kind " + kind)
	}
	if d.walked != nil && !d.walked() {
		panic("Prepare before the walk is over")
	}
	d.prepared = append(d.prepared, path)
	if path == d.unready {
		return nil, fmt.Errorf("%s: %w", path, errCapTestRefused)
	}
	return func(rel string) bool { return filepath.Base(rel) != "Cache" }, nil
}

// capTestDiscoverTree writes a workspace whose marked directories are a,
// b/c, big (more entries than are listed ahead) and x (its MARK and
// secrets excluded by the test's patterns); the root's own MARK does not
// make the root sensitive, and e/prof is given as a SensitiveSpec.
func capTestDiscoverTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "ws")
	files := map[string]string{
		"readme.txt":          "workspace file",
		"MARK":                "",
		"a/MARK":              "",
		"a/secret.txt":        "secret-a",
		"a/Cache/x":           "cache bytes",
		"b/plain.txt":         "not sensitive",
		"b/c/MARK":            "",
		"b/c/deep/secret.txt": "secret-bc",
		"b/d/MARK/x":          "a directory named MARK marks nothing",
		"big/MARK":            "",
		"e/prof/cookies":      "secret-e",
		"x/MARK":              "",
		"x/secret.txt":        "secret-x",
	}
	for i := range 40 {
		files[fmt.Sprintf("big/f%02d", i)] = fmt.Sprintf("secret-big-%d", i)
	}
	capTestWrite(t, src, files)
	capTestAge(t, src)
	return src
}

// TestCaptureDiscover: the directories Discover detects are left out of
// the workspace tree and captured into the sensitive tier with the given
// subtrees, checked in walk order and prepared after the walk, right
// before each is captured; the root is never asked about; an
// exclude pattern hides neither a marker nor a sensitive file; a
// directory too large to list ahead is detected when the walker lists it.
func TestCaptureDiscover(t *testing.T) {
	capTestAheadLimits(t, 8, 1<<14)
	ctx := context.Background()
	r := capTestOpenRepo(t)
	src := capTestDiscoverTree(t)
	var walked atomic.Bool
	d := &capTestDiscoverer{walked: walked.Load}
	o := capTestOptions(nil)
	o.hooks.walked = func() { walked.Store(true) }
	o.Discover = d
	o.Excludes = []string{"MARK", "secret*"}
	givenPrepared := false
	o.Sensitive = []SensitiveSpec{{Path: "e/prof", Kind: "given", Prepare: func(context.Context) (func(string) bool, error) {
		if !walked.Load() {
			t.Error("a given subtree was prepared before the walk was over")
		}
		givenPrepared = true
		return nil, nil
	}}}
	m := capTestCapture(t, r, src, o)
	if !m.Complete || m.Sensitive == nil {
		t.Fatalf("complete %v, sensitive part %v, errors %v", m.Complete, m.Sensitive, m.Errors)
	}
	if want := []string{"a", "b/c", "big", "x"}; !slices.Equal(d.checked, want) || !slices.Equal(d.prepared, want) || !givenPrepared {
		t.Fatalf("checked %q in walk order, prepared %q after it (and the given one: %v), want %q", d.checked, d.prepared, givenPrepared, want)
	}
	var st unix.Stat_t
	if err := unix.Stat(src, &st); err != nil {
		t.Fatal(err)
	}
	if d.asked[st.Ino] {
		t.Error("Detect was asked about the capture root")
	}

	ws := capTestFlatten(t, r, m.Root.Subtree)
	var paths []string
	for p := range ws {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	// The root's MARK and b/d/MARK are excluded; nothing sensitive is left.
	if want := []string{"b", "b/d", "b/plain.txt", "e", "readme.txt"}; !slices.Equal(paths, want) {
		t.Fatalf("workspace tree %q, want %q", paths, want)
	}
	if m.Totals.Files != 2 {
		t.Errorf("workspace totals count %d files, want 2", m.Totals.Files)
	}

	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	files := map[string]uint64{}
	for _, tr := range part.Trees {
		got[tr.Path] = tr.Kind
		files[tr.Path] = tr.Totals.Files
	}
	want := map[string]string{"a": "marked", "b/c": "marked", "big": "marked", "e/prof": "given", "x": "marked"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sensitive trees %v, want %v", got, want)
	}
	// Excludes do not apply inside sensitive trees; the filter drops Cache.
	if wantFiles := map[string]uint64{"a": 2, "b/c": 2, "big": 41, "e/prof": 1, "x": 2}; fmt.Sprint(files) != fmt.Sprint(wantFiles) {
		t.Fatalf("sensitive tree files %v, want %v", files, wantFiles)
	}
	snaptest.Check(t, r)

	// Restored with its grafts, the workspace is the source but for what
	// the excludes and the filter left out.
	for _, p := range []string{"MARK", "b/d/MARK", "a/Cache"} {
		if err := os.RemoveAll(filepath.Join(src, p)); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "out")
	if _, err := restore.Run(ctx, r, m, restore.Options{Target: dst, Grafts: part.Grafts()}); err != nil {
		t.Fatal(err)
	}
	if got, want := snaptest.Dump(t, dst, false), snaptest.Dump(t, src, false); got != want {
		t.Fatalf("restored tree differs:\n got %s\nwant %s", got, want)
	}
}

// TestCaptureDiscoverNone: a walk that finds nothing gives a manifest
// without a sensitive part, as a capture without Discover does.
func TestCaptureDiscoverNone(t *testing.T) {
	t.Parallel()
	r := capTestOpenRepo(t)
	src := filepath.Join(t.TempDir(), "ws")
	capTestWrite(t, src, map[string]string{"a/b.txt": "b", "MARK": "the root is never sensitive"})
	o := capTestOptions(nil)
	o.Discover = &capTestDiscoverer{}
	m := capTestCapture(t, r, src, o)
	if m.Sensitive != nil || !m.Complete || m.Totals.Files != 2 {
		t.Fatalf("sensitive %v, complete %v, totals %+v", m.Sensitive, m.Complete, m.Totals)
	}
}

// capTestNoSnapshots fails the test if r holds a snapshot manifest.
func capTestNoSnapshots(t *testing.T, r *repo.Repository) {
	t.Helper()
	n := 0
	if err := r.ListObjects(context.Background(), crypt.KindSnapshot, func(blob.ID) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d snapshots were saved by a failed capture", n)
	}
}

// TestCaptureDiscoverRefused: a capture ends, with no manifest, when
// Check (during the walk) or Prepare (after it) refuses a directory (a
// running browser), when a given subtree
// lies inside a detected one, and when the key lacks the sensitive tier.
func TestCaptureDiscoverRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("check", func(t *testing.T) {
		r := capTestOpenRepo(t)
		d := &capTestDiscoverer{refuse: "b/c"}
		o := capTestOptions(nil)
		o.Discover = d
		_, err := Run(ctx, r, capTestDiscoverTree(t), o)
		if !errors.Is(err, errCapTestRefused) || !strings.Contains(err.Error(), "b/c") {
			t.Fatalf("Capture: %v", err)
		}
		if want := []string{"a", "b/c"}; !slices.Equal(d.checked, want) || len(d.prepared) != 0 {
			t.Errorf("checked %q, want %q: the walk goes no further; prepared %q", d.checked, want, d.prepared)
		}
		capTestNoSnapshots(t, r)
	})
	t.Run("prepare", func(t *testing.T) {
		r := capTestOpenRepo(t)
		d := &capTestDiscoverer{unready: "big"}
		o := capTestOptions(nil)
		o.Discover = d
		_, err := Run(ctx, r, capTestDiscoverTree(t), o)
		if !errors.Is(err, errCapTestRefused) || !strings.Contains(err.Error(), "big") {
			t.Fatalf("Capture: %v", err)
		}
		if want := []string{"a", "b/c", "big"}; !slices.Equal(d.prepared, want) {
			t.Errorf("prepared %q, want %q", d.prepared, want)
		}
		capTestNoSnapshots(t, r)
	})
	t.Run("nested", func(t *testing.T) {
		r := capTestOpenRepo(t)
		o := capTestOptions(nil)
		o.Discover = &capTestDiscoverer{}
		o.Sensitive = []SensitiveSpec{{Path: "b/c/deep", Kind: "given"}}
		_, err := Run(ctx, r, capTestDiscoverTree(t), o)
		if !errors.Is(err, ErrSensitivePath) || !strings.Contains(err.Error(), "b/c/deep lies inside b/c") {
			t.Fatalf("Capture: %v", err)
		}
		capTestNoSnapshots(t, r)
	})
	t.Run("workspace-only key", func(t *testing.T) {
		tr := newCapTestRepo(t)
		r := sensTestKeyRepo(t, tr, tr.open(t), []blob.Tier{blob.Workspace})
		o := capTestOptions(nil)
		o.Discover = &capTestDiscoverer{}
		_, err := Run(ctx, r, capTestDiscoverTree(t), o)
		if !errors.Is(err, crypt.ErrTierLocked) {
			t.Fatalf("Capture: %v", err)
		}
		capTestNoSnapshots(t, r)
	})
}
