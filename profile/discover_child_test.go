package profile

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// discoverChildEnv marks a copy of this test binary started by runChild.
const discoverChildEnv = "LIFEBOAT_DISCOVER_CHILD"

// runChild runs test in a copy of this test binary, in a fresh
// world-writable directory (its TMPDIR and HOME), started with attr (as
// another user, in a new mount namespace), and fails t if it fails,
// skips t if it skips.
func runChild(t *testing.T, test string, attr *syscall.SysProcAttr) {
	t.Helper()
	dir, err := os.MkdirTemp("", "lifeboat-discover-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o777))
	bin := filepath.Join(dir, "profile.test")
	in, err := os.Open(os.Args[0])
	must(t, err)
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	must(t, err)
	_, err = io.Copy(out, in)
	must(t, err)
	must(t, out.Close())
	cmd := exec.Command(bin, "-test.run", "^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), discoverChildEnv+"=1", "TMPDIR="+dir, "HOME="+dir)
	cmd.SysProcAttr = attr
	log, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", log)
	switch {
	case err != nil:
		t.Fatalf("child: %v", err)
	case strings.Contains(string(log), "--- SKIP: "+test):
		t.Skip("the child skipped")
	case !strings.Contains(string(log), "--- PASS: "+test):
		t.Fatal("the child did not run the test")
	}
}

// TestDiscoverUnreadable: directories the user may not read or search
// are passed over and discovery goes on; a directory it may search but
// not list is still recognised by its markers, as the former algorithm
// did. As root (which reads everything) it runs as user 65534.
func TestDiscoverUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		if os.Getenv(discoverChildEnv) != "" {
			t.Fatal("the child still runs as root")
		}
		runChild(t, "TestDiscoverUnreadable", &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}})
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
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	if os.Getenv(discoverChildEnv) == "" {
		runChild(t, "TestDiscoverBindMountLoop", &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS})
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
