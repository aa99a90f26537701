package snapshot

import (
	"bytes"
	"context"
	"path"
	"slices"

	"lifeboat/blob"
)

// Change is one difference between two snapshots.
type Change struct {
	Path string `json:"path"`
	// Kind is "added", "removed", "modified" (content or type differs) or
	// "metadata" (only mode, owner, times or xattrs differ).
	Kind string `json:"kind"`
}

// Diff calls fn with every difference between the trees a and b, in path
// order. Identical subtrees (same tree blob ids) are skipped unread.
func Diff(ctx context.Context, l BlobLoader, a, b []blob.ID, fn func(Change) error) error {
	return diffDir(ctx, l, a, b, "", fn)
}

func diffDir(ctx context.Context, l BlobLoader, a, b []blob.ID, prefix string, fn func(Change) error) error {
	if slices.Equal(a, b) {
		return nil
	}
	left, err := loadAll(ctx, l, a)
	if err != nil {
		return err
	}
	right, err := loadAll(ctx, l, b)
	if err != nil {
		return err
	}
	i, j := 0, 0
	for i < len(left) || j < len(right) {
		var c int
		switch {
		case i == len(left):
			c = 1
		case j == len(right):
			c = -1
		default:
			c = bytes.Compare(left[i].Name, right[j].Name)
		}
		switch {
		case c < 0:
			err = emitTree(ctx, l, &left[i], path.Join(prefix, string(left[i].Name)), "removed", fn)
			i++
		case c > 0:
			err = emitTree(ctx, l, &right[j], path.Join(prefix, string(right[j].Name)), "added", fn)
			j++
		default:
			err = diffNode(ctx, l, &left[i], &right[j], path.Join(prefix, string(left[i].Name)), fn)
			i, j = i+1, j+1
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func diffNode(ctx context.Context, l BlobLoader, x, y *Node, p string, fn func(Change) error) error {
	if x.Type != y.Type {
		if err := emitTree(ctx, l, x, p, "removed", fn); err != nil {
			return err
		}
		return emitTree(ctx, l, y, p, "added", fn)
	}
	contentSame := slices.Equal(x.Content, y.Content) && bytes.Equal(x.LinkTarget, y.LinkTarget) && bytes.Equal(x.LinkPath, y.LinkPath) && x.Size == y.Size
	metaSame := x.Mode == y.Mode && x.UID == y.UID && x.GID == y.GID && x.MtimeNs == y.MtimeNs &&
		slices.EqualFunc(x.Xattrs, y.Xattrs, func(a, b Xattr) bool { return a.Name == b.Name && bytes.Equal(a.Value, b.Value) })
	switch {
	case !contentSame:
		if err := fn(Change{Path: p, Kind: "modified"}); err != nil {
			return err
		}
	case !metaSame && x.Type != TypeDir:
		if err := fn(Change{Path: p, Kind: "metadata"}); err != nil {
			return err
		}
	}
	if x.Type == TypeDir {
		return diffDir(ctx, l, x.Subtree, y.Subtree, p, fn)
	}
	return nil
}

// emitTree reports n and, for a directory, everything under it.
func emitTree(ctx context.Context, l BlobLoader, n *Node, p, kind string, fn func(Change) error) error {
	if err := fn(Change{Path: p, Kind: kind}); err != nil {
		return err
	}
	if n.Type != TypeDir {
		return nil
	}
	return Walk(ctx, l, n.Subtree, p, func(q string, _ *Node) error { return fn(Change{Path: q, Kind: kind}) })
}

// loadAll reads a whole directory. Diff needs both sides side by side; a
// directory of a million entries costs a few hundred MB here.
func loadAll(ctx context.Context, l BlobLoader, subtree []blob.ID) ([]Node, error) {
	var nodes []Node
	err := LoadDir(ctx, l, blob.Workspace, subtree, func(n *Node) error {
		nodes = append(nodes, *n)
		return nil
	})
	return nodes, err
}
