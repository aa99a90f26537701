package snapshot

import (
	"bytes"
	"errors"
	"fmt"

	"lifeboat/blob"
)

// NodeType is the kind of a tree entry.
type NodeType string

// Node types. Sockets and devices are recorded but their content is not:
// restore skips them.
const (
	TypeFile     NodeType = "file"
	TypeDir      NodeType = "dir"
	TypeSymlink  NodeType = "symlink"
	TypeHardlink NodeType = "hardlink" // a later name for an earlier file node
	TypeFIFO     NodeType = "fifo"
	TypeSocket   NodeType = "socket" // recorded as skipped
	TypeDevice   NodeType = "device" // recorded as skipped
)

// Xattr is one extended attribute (only user.* are captured).
type Xattr struct {
	Name  string `json:"name"`
	Value []byte `json:"value"`
}

// Node is one directory entry.
type Node struct {
	Name    []byte   `json:"name"` // raw bytes; base64 in JSON
	Type    NodeType `json:"type"`
	Mode    uint32   `json:"mode"` // permission bits with setuid, setgid, sticky (07777)
	UID     uint32   `json:"uid"`
	GID     uint32   `json:"gid"`
	User    string   `json:"user,omitempty"`
	Group   string   `json:"group,omitempty"`
	MtimeNs int64    `json:"mtime_ns"`
	Size    uint64   `json:"size,omitempty"`
	// Symlinks: the link's target, raw bytes.
	LinkTarget []byte `json:"link_target,omitempty"`
	// Hard links: the slash-separated path, from the snapshot root, of the
	// earlier file node this one shares content with.
	LinkPath []byte  `json:"link_path,omitempty"`
	Xattrs   []Xattr `json:"xattrs,omitempty"` // sorted by name
	// Files: the data blobs of the content, in order.
	Content []blob.ID `json:"content,omitempty"`
	// Directories: the tree blobs listing the entries, in name order.
	Subtree []blob.ID `json:"subtree,omitempty"`
}

// ValidName reports whether name can be a directory entry: not empty, not
// "." or "..", and without '/' or NUL. A restore refuses any other name.
func ValidName(name []byte) error {
	switch {
	case len(name) == 0:
		return fmt.Errorf("empty name")
	case bytes.Equal(name, []byte(".")) || bytes.Equal(name, []byte("..")):
		return fmt.Errorf("name %q is not allowed", name)
	case bytes.IndexByte(name, '/') >= 0:
		return fmt.Errorf("name %q contains '/'", name)
	case bytes.IndexByte(name, 0) >= 0:
		return fmt.Errorf("name %q contains a NUL byte", name)
	}
	return nil
}

// Valid checks a node's fields for internal consistency (not its name).
func (n *Node) Valid() error {
	switch n.Type {
	case TypeFile:
		if n.LinkTarget != nil || n.Subtree != nil || n.LinkPath != nil {
			return fmt.Errorf("file %q carries link or subtree fields", n.Name)
		}
	case TypeDir:
		if n.Content != nil || n.LinkTarget != nil || n.LinkPath != nil {
			return fmt.Errorf("directory %q carries content or link fields", n.Name)
		}
	case TypeSymlink:
		if len(n.LinkTarget) == 0 || bytes.IndexByte(n.LinkTarget, 0) >= 0 {
			return fmt.Errorf("symlink %q has an empty or NUL-bearing target", n.Name)
		}
	case TypeHardlink:
		if len(n.LinkPath) == 0 {
			return fmt.Errorf("hard link %q has no link path", n.Name)
		}
	case TypeFIFO, TypeSocket, TypeDevice:
	default:
		return fmt.Errorf("entry %q has unknown type %q", n.Name, n.Type)
	}
	if n.Mode&^07777 != 0 {
		return fmt.Errorf("entry %q has mode bits %o outside 07777", n.Name, n.Mode)
	}
	return nil
}

// ErrUnsafeEntry marks a snapshot entry, read from an untrusted tree or
// sensitive part, that is refused because writing it could reach outside
// a restore target or could not be restored faithfully: a bad name, a hard link that does not point to an
// earlier file of the snapshot, a node whose fields do not fit its type, or
// an extended attribute outside the user namespace.
var ErrUnsafeEntry = errors.New("unsafe snapshot entry refused")
