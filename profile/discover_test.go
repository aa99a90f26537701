package profile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/treetest"
)

// checkDiscover runs Discover on root and fails t unless it returns the
// profiles want ("rel kind"), in this order, each with Dir under root.
func checkDiscover(t *testing.T, root string, want ...string) {
	t.Helper()
	got, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, p := range got {
		have = append(have, p.Rel+" "+string(p.Kind))
		if p.Dir != filepath.Join(root, filepath.FromSlash(p.Rel)) {
			t.Errorf("%q: Dir %q is not its Rel under %q", p.Rel, p.Dir, root)
		}
	}
	if !slices.Equal(have, want) {
		t.Fatalf("Discover found\n%q\nwant\n%q", have, want)
	}
}

// TestDiscoverMarkersNotRegular: a marker, a Chromium profile folder or
// its Preferences that is a symlink, a directory or a FIFO makes no
// profile; the same layouts with regular files do, and the reference
// (the former algorithm) agrees.
func TestDiscoverMarkersNotRegular(t *testing.T) {
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{
		"real.txt":            "x",
		"realdir/Preferences": "{}",

		"no/ini-link/profiles.ini":           "->../../real.txt",
		"no/ini-dir/profiles.ini":            "/",
		"no/ini-fifo/profiles.ini":           "|",
		"no/prefs-link/prefs.js":             "->../../real.txt",
		"no/prefs-link/cookies.sqlite":       "",
		"no/cookies-link/prefs.js":           "//",
		"no/cookies-link/cookies.sqlite":     "->../../real.txt",
		"no/key4-dir/prefs.js":               "//",
		"no/key4-dir/key4.db":                "/",
		"no/prefs-alone/prefs.js":            "//",
		"no/ls-link/Local State":             "->../../real.txt",
		"no/ls-link/Default/Preferences":     "{}",
		"no/ls-dir/Local State":              "/",
		"no/ls-dir/Default/Preferences":      "{}",
		"no/folder-link/Local State":         "{}",
		"no/folder-link/Default":             "->../../realdir",
		"no/prefs-link2/Local State":         "{}",
		"no/prefs-link2/Default/Preferences": "->../../../real.txt",
		"no/prefs-dir/Local State":           "{}",
		"no/prefs-dir/Default/Preferences":   "/",
		"no/ls-and-ini/Local State":          "{}", // no profile folder: not a Firefox root either,
		"no/ls-and-ini/profiles.ini":         "",
		"no/ls-and-ini/inner/prefs.js":       "", // but searched further
		"no/ls-and-ini/inner/key4.db":        "",
		"no/linked-profile":                  "->../yes/ff-root",
		"yes/chrome/Local State":             "{}",
		"yes/chrome/Profile 1/Preferences":   "{}",
		"yes/ff-root/profiles.ini":           "",
		"yes/ff-root/nested/profiles.ini":    "", // inside a profile: not searched
		"yes/ff/prefs.js":                    "",
		"yes/ff/cookies.sqlite":              "",
		"yes/ff-key4/prefs.js":               "",
		"yes/ff-key4/key4.db":                "",
		"yes/ls-dir-ini/Local State":         "/", // not a regular Local State: Firefox is looked for
		"yes/ls-dir-ini/profiles.ini":        "",
	})
	checkDiscover(t, ws,
		"no/ls-and-ini/inner firefox",
		"yes/chrome chromium",
		"yes/ff firefox",
		"yes/ff-key4 firefox",
		"yes/ff-root firefox",
		"yes/ls-dir-ini firefox",
	)
	compareWithRef(t, ws)
}

// compareWithRef fails t unless Discover and the former algorithm find
// the same profiles in root.
func compareWithRef(t *testing.T, root string) {
	t.Helper()
	got, err := Discover(root)
	want, werr := discoverRef(root)
	if (err == nil) != (werr == nil) || !slices.Equal(got, want) {
		t.Fatalf("Discover(%q):\n%+v %v\nthe former algorithm:\n%+v %v", root, got, err, want, werr)
	}
}

// TestDiscoverRoot: a root that is a symlink is followed, a root that is
// a file holds no profiles, a missing root is an error naming it, and
// the root itself is never a profile.
func TestDiscoverRoot(t *testing.T) {
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"profiles.ini": "", "a/profiles.ini": "", "file": ""})
	checkDiscover(t, ws, "a firefox")
	link := filepath.Join(t.TempDir(), "link")
	must(t, os.Symlink(ws, link))
	checkDiscover(t, link, "a firefox")
	checkDiscover(t, filepath.Join(ws, "file"))
	missing := filepath.Join(ws, "missing")
	if _, err := Discover(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Discover of a missing root: %v", err)
	}
	// A relative root gives absolute Dirs.
	t.Chdir(ws)
	if got, err := Discover("."); err != nil || len(got) != 1 || got[0].Dir != filepath.Join(ws, "a") {
		t.Fatalf("Discover(.) in %s: %+v %v", ws, got, err)
	}
}

// TestListUnknownType: an entry of unknown type (DT_UNKNOWN, which some
// filesystems return for every entry) is stat'ed: a directory is
// searched, a regular marker counts, a symlink or a vanished entry is
// neither.
func TestListUnknownType(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"sub/x":        "",
		"profiles.ini": "",
		"prefs.js":     "->profiles.ini",
		"dirlink":      "->sub",
		"key4.db":      "/",
		"other":        "",
	})
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	defer unix.Close(fd)
	var l listing
	for _, name := range []string{"sub", "profiles.ini", "prefs.js", "dirlink", "key4.db", "other", "vanished"} {
		l.add(fd, []byte(name), unix.DT_UNKNOWN)
	}
	if want := []string{"sub", "key4.db"}; !slices.Equal(l.subdirs, want) {
		t.Errorf("subdirectories %q, want %q", l.subdirs, want)
	}
	if l.markers != 1<<profilesIni {
		t.Errorf("markers %05b, want only profiles.ini (%05b)", l.markers, 1<<profilesIni)
	}
	// The kernel's listing of the same directory gives the same result.
	listed, err := list(fd, make([]byte, 512))
	must(t, err)
	slices.Sort(listed.subdirs)
	if !listed.complete || listed.markers != l.markers || !slices.Equal(listed.subdirs, []string{"key4.db", "sub"}) {
		t.Errorf("list: %+v", listed)
	}
}

// TestListNames: names are bytes, not UTF-8; every entry of a directory
// larger than the getdents buffer is listed, and only subdirectories are
// kept.
func TestListNames(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 300 {
		name := strings.Repeat(string(rune('a'+i%26)), 1+i%250) + "\xff\xfe" + string(rune('0'+i%10))
		p := filepath.Join(dir, name)
		if i%3 == 0 {
			must(t, os.Mkdir(p, 0o755))
			want = append(want, name)
		} else {
			must(t, os.WriteFile(p, nil, 0o644))
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	defer unix.Close(fd)
	l, err := list(fd, make([]byte, 1024))
	must(t, err)
	slices.Sort(l.subdirs)
	slices.Sort(want)
	if !l.complete || !slices.Equal(l.subdirs, want) || l.markers != 0 {
		t.Fatalf("listed %d subdirectories (complete %v, markers %b), want %d", len(l.subdirs), l.complete, l.markers, len(want))
	}
}

// writeTree writes entries below root (treetest.Write).
func writeTree(t *testing.T, root string, entries map[string]string) {
	treetest.Write(t, root, entries)
}
