package restore

import (
	"context"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// The root node's xattrs go through safeCheckNode like every other
// node's: trusted.* and system.posix_acl_* ones do not land on the target.
func TestRestoreRootXattrsChecked(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	root := r.Dir(t, "root", r.File(t, "f", []byte("x")))
	// ACL: user::rwx, user:65534:rwx, group::r-x, mask::rwx, other::r-x
	acl := []byte{2, 0, 0, 0,
		1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
		2, 0, 7, 0, 0xfe, 0xff, 0, 0,
		4, 0, 5, 0, 0xff, 0xff, 0xff, 0xff,
		0x10, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 5, 0, 0xff, 0xff, 0xff, 0xff}
	root.Xattrs = []snapshot.Xattr{{Name: "system.posix_acl_default", Value: acl}, {Name: "trusted.evil", Value: []byte("1")}}
	m := r.Manifest(t, root, false)
	target := filepath.Join(t.TempDir(), "t")
	_, err := Run(context.Background(), r.Repository, m, Options{Target: target})
	t.Logf("restore err: %v", err)
	buf := make([]byte, 256)
	n, gerr := unix.Getxattr(target, "trusted.evil", buf)
	t.Logf("trusted.evil on target: %q %v", buf[:max(n, 0)], gerr)
	n, gerr = unix.Getxattr(target, "system.posix_acl_default", buf)
	t.Logf("posix_acl_default on target: %d bytes %v", n, gerr)
	if gerr == nil {
		t.Errorf("root xattr outside user.* was applied to the target")
	}
}
