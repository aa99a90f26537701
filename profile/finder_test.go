package profile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"lifeboat/internal/repotest"
	"lifeboat/internal/seedtest"
	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/capture"
)

// finderCapture captures root with a Finder and returns the profiles it
// prepared and the sensitive trees of the snapshot.
func finderCapture(t *testing.T, r *repo.Repository, root string) (found, trees []string, m *snapshot.Manifest) {
	t.Helper()
	ctx := context.Background()
	abs, err := filepath.Abs(root)
	must(t, err)
	f := &Finder{Root: abs}
	m, err = capture.Run(ctx, r, root, capture.Options{Workspace: "w", Discover: f})
	must(t, err)
	for _, p := range f.Found {
		found = append(found, p.Rel+" "+string(p.Kind))
		if want := filepath.Join(abs, filepath.FromSlash(p.Rel)); p.Dir != want {
			t.Errorf("found %s with Dir %s, want %s", p.Rel, p.Dir, want)
		}
	}
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	must(t, err)
	if part != nil {
		for _, tr := range part.Trees {
			trees = append(trees, tr.Path+" "+tr.Kind)
		}
	}
	return found, trees, m
}

// hasError reports whether m lists the error of a profile at rel, a path
// that is not valid UTF-8 (escaped \xNN in the error, as captures do).
func hasError(m *snapshot.Manifest, rel string) bool {
	var b strings.Builder
	for p := rel; len(p) > 0; {
		r, size := utf8.DecodeRuneInString(p)
		if r == utf8.RuneError && size <= 1 {
			fmt.Fprintf(&b, `\x%02x`, p[0])
		} else {
			b.WriteString(p[:size])
		}
		p = p[size:]
	}
	for _, e := range m.Errors {
		if e.Path == b.String() && strings.Contains(e.Error, "not valid UTF-8") {
			return true
		}
	}
	return false
}

// TestFinderMatchesDiscover: on random trees (markers of every type in
// random places, nested profiles, symlinks to profiles, FIFOs, names that
// are not UTF-8), the profiles a capture's walk finds with a Finder, and
// the sensitive trees its snapshot holds, are exactly those Discover
// finds, from the root and through a symlink to it.
func TestFinderMatchesDiscover(t *testing.T) {
	rng := seedtest.Rand(t)
	r := repotest.New(t, repotest.Options{})
	total, invalid := 0, 0
	for i := range 40 {
		ws := t.TempDir()
		randomTree(t, rng, ws, ws, 0)
		roots := []string{ws}
		if i%8 == 0 {
			link := filepath.Join(t.TempDir(), "ws")
			must(t, os.Symlink(ws, link))
			roots = append(roots, link)
		}
		for _, root := range roots {
			ps, err := Discover(root)
			must(t, err)
			// Found and the part list the profiles sorted by path ("a"
			// before "a b" before "a/b"), Discover in walk order. Sort
			// by path alone: with the kind appended, "a firefox" would
			// sort after "a b/...".
			slices.SortFunc(ps, func(a, b Profile) int { return strings.Compare(a.Rel, b.Rel) })
			var want []string
			var unnamed []string // paths the sensitive part cannot record
			for _, p := range ps {
				if !utf8.ValidString(p.Rel) {
					unnamed = append(unnamed, p.Rel)
					invalid++
					continue
				}
				want = append(want, p.Rel+" "+string(p.Kind))
			}
			total += len(want)
			found, trees, m := finderCapture(t, r, root)
			for _, rel := range unnamed {
				if m.Complete || !hasError(m, rel) {
					t.Fatalf("tree %d (%s): a profile at %q is not reported: errors %v", i, root, rel, m.Errors)
				}
			}
			if !slices.Equal(found, want) {
				t.Fatalf("tree %d (%s): the capture's walk found %q, Discover %q", i, root, found, want)
			}
			if !slices.Equal(trees, want) {
				t.Fatalf("tree %d (%s): the snapshot's sensitive trees are %q, Discover found %q", i, root, trees, want)
			}
		}
	}
	if total < 3 {
		t.Fatalf("only %d profiles in 40 trees (expected 10-30): the comparison is too weak", total)
	}
	t.Logf("%d profiles compared, %d more at paths that are not UTF-8", total, invalid)
}

// TestFinderFixtures: the capture's walk finds a Chromium fixture profile
// and a Firefox root, prepares them (a running browser is refused), and
// the Check hook can refuse one.
func TestFinderFixtures(t *testing.T) {
	ctx := context.Background()
	r := repotest.New(t, repotest.Options{})
	ws := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(ws, "home", ".config"), 0o700))
	must(t, localstorage.New(1).Write(ctx, filepath.Join(ws, "home", ".config", "chromium"), fixture.Options{WAL: true}))
	ff := filepath.Join(ws, "home", ".mozilla", "firefox")
	must(t, os.MkdirAll(filepath.Join(ff, "abc.default"), 0o700))
	must(t, os.WriteFile(filepath.Join(ff, "profiles.ini"), []byte("[Profile0]\nPath=abc.default\n"), 0o600))
	found, trees, _ := finderCapture(t, r, ws)
	want := []string{"home/.config/chromium chromium", "home/.mozilla/firefox firefox"}
	if !slices.Equal(found, want) || !slices.Equal(trees, want) {
		t.Fatalf("found %q, trees %q, want %q", found, trees, want)
	}

	f := &Finder{Root: ws, Allow: func(p Profile) error {
		if p.Kind == Firefox {
			return ErrNotProfile
		}
		return nil
	}}
	if _, err := capture.Run(ctx, r, ws, capture.Options{Workspace: "w", Discover: f}); !errors.Is(err, ErrNotProfile) {
		t.Fatalf("a capture whose Check refuses a profile: %v", err)
	}

	running := t.TempDir()
	must(t, localstorage.New(3).Write(ctx, filepath.Join(running, "chrome"), fixture.Options{LockPID: os.Getpid()}))
	f = &Finder{Root: running}
	_, err := capture.Run(ctx, r, running, capture.Options{Workspace: "w", Discover: f})
	var re *RunningError
	if !errors.As(err, &re) || !errors.Is(err, ErrBrowserRunning) || len(f.Found) != 0 {
		t.Fatalf("a running browser's profile: %v (found %v)", err, f.Found)
	}
}

// TestFinderProfileFolderSymlink: a Local State beside a symlink to a
// directory holding Preferences makes no profile, for the capture's walk
// as for Discover: the symlink is not followed.
func TestFinderProfileFolderSymlink(t *testing.T) {
	r := repotest.New(t, repotest.Options{})
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{
		"realdir/Preferences":     "{}",
		"link/Local State":        "{}",
		"link/Default":            "->../realdir",
		"link/notes.txt":          "workspace file",
		"chrome/Local State":      "{}",
		"chrome/Prof/Preferences": "{}",
	})
	checkDiscover(t, ws, "chrome chromium")
	found, trees, _ := finderCapture(t, r, ws)
	want := []string{"chrome chromium"}
	if !slices.Equal(found, want) || !slices.Equal(trees, want) {
		t.Fatalf("the capture's walk found %q (sensitive trees %q), Discover %q", found, trees, want)
	}
}

// lateBrowser is a Finder whose browser starts after the capture's walk
// checked the profile, before the profile is read: Prepare makes
// SingletonLock name this live process first.
type lateBrowser struct{ *Finder }

func (l lateBrowser) Prepare(ctx context.Context, rel, kind string) (func(string) bool, error) {
	lock := filepath.Join(l.Root, filepath.FromSlash(rel), "SingletonLock")
	host, _ := os.Hostname()
	if err := os.Remove(lock); err != nil {
		return nil, err
	}
	if err := os.Symlink(fmt.Sprintf("%s-%d", host, os.Getpid()), lock); err != nil {
		return nil, err
	}
	return l.Finder.Prepare(ctx, rel, kind)
}

// TestFinderBrowserStartsDuringCapture: a browser that starts while the
// rest of the workspace is read is refused when its profile is prepared,
// right before it is read, and no snapshot is saved.
func TestFinderBrowserStartsDuringCapture(t *testing.T) {
	ctx := context.Background()
	r := repotest.New(t, repotest.Options{})
	ws := t.TempDir()
	must(t, localstorage.New(4).Write(ctx, filepath.Join(ws, "chrome"), fixture.Options{}))
	must(t, os.WriteFile(filepath.Join(ws, "z.txt"), []byte("read after the profile was found"), 0o600))
	f := &Finder{Root: ws}
	_, err := capture.Run(ctx, r, ws, capture.Options{Workspace: "w", Discover: lateBrowser{f}})
	if !errors.Is(err, ErrBrowserRunning) || len(f.Found) != 0 {
		t.Fatalf("a browser started during the capture: %v (found %v)", err, f.Found)
	}
	if _, err := snapshot.Find(ctx, r, "latest", "w"); !errors.Is(err, snapshot.ErrNoSnapshot) {
		t.Fatalf("a snapshot was saved: %v", err)
	}
}
