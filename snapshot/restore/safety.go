package restore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"lifeboat/snapshot"
)

// safeMaxXattrValue is the largest extended attribute value Linux accepts.
const safeMaxXattrValue = 64 << 10

// safeCheckNode checks a node read from an untrusted tree more strictly
// than Node.Valid: its name, that only the fields of its type are set, and
// its extended attributes. A refusal wraps snapshot.ErrUnsafeEntry; the
// caller ties it to the entry's path (a restore Error).
func safeCheckNode(n *snapshot.Node) error {
	if err := snapshot.ValidName(n.Name); err != nil {
		return fmt.Errorf("%w: %v", snapshot.ErrUnsafeEntry, err)
	}
	return safeCheckFields(n)
}

// safeCheckFields is safeCheckNode without the name check, for the
// snapshot's root node, which has no name but carries metadata (mode,
// owner, xattrs) that restore applies to the target itself.
func safeCheckFields(n *snapshot.Node) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{snapshot.ErrUnsafeEntry}, a...)...)
	}
	if err := n.Valid(); err != nil {
		return fail("%v", err)
	}
	if n.Type != snapshot.TypeDir && n.Subtree != nil {
		return fail("a %s carries a subtree", n.Type)
	}
	if n.Type != snapshot.TypeFile && n.Content != nil {
		return fail("a %s carries file content", n.Type)
	}
	if n.Type != snapshot.TypeSymlink && n.LinkTarget != nil {
		return fail("a %s carries a symlink target", n.Type)
	}
	if n.Type != snapshot.TypeHardlink && n.LinkPath != nil {
		return fail("a %s carries a hard link path", n.Type)
	}
	if n.Type == snapshot.TypeHardlink && len(n.Xattrs) > 0 {
		return fail("a hard link carries extended attributes (they belong to the file it links to)")
	}
	var last string
	for i, x := range n.Xattrs {
		switch {
		case !strings.HasPrefix(x.Name, "user.") || len(x.Name) == len("user."):
			// security.capability, trusted.* or system.posix_acl_* written
			// as root could grant privileges the workspace never had.
			return fail("extended attribute %q is outside the user.* namespace", x.Name)
		case len(x.Name) > 255 || strings.IndexByte(x.Name, 0) >= 0:
			return fail("extended attribute name %q is too long or contains NUL", x.Name)
		case len(x.Value) > safeMaxXattrValue:
			return fail("extended attribute %q has %d bytes, above the %d-byte limit", x.Name, len(x.Value), safeMaxXattrValue)
		case i > 0 && x.Name <= last:
			return fail("extended attribute %q is duplicated or out of order", x.Name)
		}
		last = x.Name
	}
	return nil
}

// safeSplitLinkPath splits a hard link's LinkPath (slash-separated, from
// the snapshot root) into names, refusing an absolute path, empty, "." and
// ".." components and NUL bytes: every component must be a ValidName.
func safeSplitLinkPath(lp []byte) ([]string, error) {
	if len(lp) == 0 {
		return nil, errors.New("empty link path")
	}
	if lp[0] == '/' {
		return nil, fmt.Errorf("link path %q is absolute", lp)
	}
	parts := bytes.Split(lp, []byte{'/'})
	out := make([]string, len(parts))
	for i, c := range parts {
		if err := snapshot.ValidName(c); err != nil {
			return nil, fmt.Errorf("link path %q: %v", lp, err)
		}
		out[i] = string(c)
	}
	return out, nil
}

// safeDisplay renders a slash path from the snapshot root for messages:
// the root is ".", and bytes that are not UTF-8 are escaped.
func safeDisplay(p string) string {
	if p == "" {
		return `"."`
	}
	return fmt.Sprintf("%q", p)
}

// safeComparePaths orders two slash paths as a depth-first walk in name
// order visits them: component by component, a parent before its
// children.
func safeComparePaths(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}
