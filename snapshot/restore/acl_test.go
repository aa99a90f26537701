package restore

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/snapshot/internal/snaptest"
)

// rsDefaultACL sets on dir a default POSIX ACL (user::rwx group::rwx
// other::---), as setfacl -d would; it skips the test where the filesystem
// has no ACLs.
func rsDefaultACL(t *testing.T, dir string) {
	t.Helper()
	acl := binary.LittleEndian.AppendUint32(nil, 2)                  // POSIX_ACL_XATTR_VERSION
	for _, e := range [][2]uint16{{0x01, 7}, {0x04, 7}, {0x20, 0}} { // USER_OBJ, GROUP_OBJ, OTHER
		acl = binary.LittleEndian.AppendUint16(acl, e[0])
		acl = binary.LittleEndian.AppendUint16(acl, e[1])
		acl = binary.LittleEndian.AppendUint32(acl, 0xffffffff)
	}
	if err := unix.Setxattr(dir, "system.posix_acl_default", acl, 0); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("no POSIX ACLs on %s", dir)
		}
		t.Fatal(err)
	}
}

// A restore into a directory with a default ACL: new files take their mode
// from the ACL rather than the umask, so a file created with its final
// mode (createMode) can come out with fewer bits than the snapshot says.
// Every mode must come back exact.
func TestRestoreModeUnderDefaultACL(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"empty": "", "data": "data"} {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := snaptest.NewRepo(t)
	m := r.SnapshotOf(t, src)
	parent := filepath.Join(base, "acl")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	rsDefaultACL(t, parent)
	target := filepath.Join(parent, "out")
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: target}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"empty", "data"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(target, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != 0o644 {
			t.Errorf("%s restored with mode %04o, want 0644", name, st.Mode&0o7777)
		}
	}
}
