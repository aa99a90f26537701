package ssh

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/providers/providertest"
)

// TestMirrorHoldsSocketsAndDevices: a socket and a device node on the
// host are in the mirror as nodes of their type (a device with device
// number 0), so capture records them; an unchanged one is left as it is
// by the next read.
func TestMirrorHoldsSocketsAndDevices(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a device node on the host needs root")
	}
	_, cfg := setup(t)
	p := mustNew(t, cfg)
	id := providertest.MustCreate(t, p, "nodes")
	dir := filepath.Join(cfg.Root, string(id))
	if err := unix.Mknod(filepath.Join(dir, "nulldev"), unix.S_IFCHR|0o640, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	providertest.MakeSocket(t, filepath.Join(dir, "agent.sock"))
	check := func(m string) map[string]uint64 {
		t.Helper()
		inodes := map[string]uint64{}
		for name, want := range map[string]fs.FileMode{"nulldev": fs.ModeDevice | fs.ModeCharDevice, "agent.sock": fs.ModeSocket} {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(m, name), &st); err != nil {
				t.Fatalf("%s is not in the mirror: %v", name, err)
			}
			fi, _ := os.Lstat(filepath.Join(m, name))
			if fi.Mode().Type() != want || st.Rdev != 0 {
				t.Fatalf("%s in the mirror: mode %v rdev %d, want type %v rdev 0", name, fi.Mode(), st.Rdev, want)
			}
			host, _ := os.Lstat(filepath.Join(dir, name))
			if fi.Mode().Perm() != host.Mode().Perm() || !fi.ModTime().Equal(host.ModTime()) {
				t.Fatalf("%s in the mirror: %v %v, on the host %v %v", name, fi.Mode(), fi.ModTime(), host.Mode(), host.ModTime())
			}
			inodes[name] = st.Ino
		}
		return inodes
	}
	first := check(read(t, p, id))
	if again := check(read(t, p, id)); again["nulldev"] != first["nulldev"] || again["agent.sock"] != first["agent.sock"] {
		t.Fatal("unchanged nodes were made again by the second read")
	}
}
