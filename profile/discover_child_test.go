package profile

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/nstest"
	"lifeboat/internal/proctest"
)

// discoverChildEnv marks the copy of this test binary that runs
// TestDiscoverUnreadable as user nobody.
const discoverChildEnv = "LIFEBOAT_DISCOVER_CHILD"

// TestDiscoverUnreadable: directories the user may not read or search
// are passed over and discovery goes on; a directory it may search but
// not list is still recognised by its markers, as the former algorithm
// did. As root (which reads everything) it runs as user 65534.
func TestDiscoverUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		if os.Getenv(discoverChildEnv) != "" {
			t.Fatal("the child still runs as root")
		}
		proctest.RunTestAsNobody(t, proctest.SharedTempDir(t, 0o777), "TestDiscoverUnreadable", discoverChildEnv)
		return
	}
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{
		"a-closed/ff/profiles.ini":          "",
		"b-search-only/profiles.ini":        "",
		"b-search-only/inner/profiles.ini":  "",
		"c-read-only/profiles.ini":          "",
		"c-read-only/sub/profiles.ini":      "",
		"d-search-only/Local State":         "{}",
		"d-search-only/Default/Preferences": "{}",
		"e/closed/profiles.ini":             "",
		"e/z/profiles.ini":                  "",
		"f/Local State":                     "{}",
		"f/Default/Preferences":             "{}",
		"z-ok/prefs.js":                     "",
		"z-ok/key4.db":                      "",
	})
	modes := map[string]os.FileMode{"a-closed": 0, "b-search-only": 0o100, "c-read-only": 0o400,
		"d-search-only": 0o100, "e/closed": 0, "f/Default": 0}
	for rel, m := range modes {
		must(t, os.Chmod(filepath.Join(ws, rel), m))
	}
	t.Cleanup(func() { // before t.TempDir's removal
		for rel := range modes {
			_ = os.Chmod(filepath.Join(ws, rel), 0o755)
		}
	})
	checkDiscover(t, ws, "b-search-only firefox", "e/z firefox", "z-ok firefox")
	compareWithRef(t, ws)
}

// TestDiscoverBindMountLoop: a directory that is one of its own parents
// (a bind mount of the workspace inside it) is not searched again, while
// a bind mount of another directory is searched like any directory. It
// runs as root in a private mount namespace.
func TestDiscoverBindMountLoop(t *testing.T) {
	if !nstest.InOwnMountNamespace(t) {
		return
	}
	ws, other := t.TempDir(), t.TempDir()
	writeTree(t, ws, map[string]string{"a/b/loop": "/", "m": "/", "p/profiles.ini": ""})
	writeTree(t, other, map[string]string{"ff/prefs.js": "", "ff/cookies.sqlite": ""})
	for target, src := range map[string]string{"a/b/loop": ws, "m": other} {
		p := filepath.Join(ws, target)
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("bind mount: %v", err)
		}
		t.Cleanup(func() { must(t, unix.Unmount(p, unix.MNT_DETACH)) })
	}
	checkDiscover(t, ws, "m/ff firefox", "p firefox")
}
