package snapshot

import (
	"context"
	"path"

	"lifeboat/blob"
)

// WalkFunc is called for every entry of a snapshot tree with its slash
// path from the root. Returning SkipDir from a directory skips its entries.
type WalkFunc func(p string, n *Node) error

// skipDir is returned by a WalkFunc to skip a directory's entries.
type skipDir struct{}

func (skipDir) Error() string { return "skip this directory" }

// SkipDir tells Walk not to descend into the directory just visited.
var SkipDir error = skipDir{}

// Walk visits every entry under the directory whose tree blobs are subtree,
// depth first in name order, with paths joined under prefix ("" for the
// root). It holds one decoded tree blob per directory level, so neither a
// huge directory nor a deep tree needs much memory. Names come from
// DecodeTree, which has validated them.
func Walk(ctx context.Context, l BlobLoader, subtree []blob.ID, prefix string, fn WalkFunc) error {
	return LoadDir(ctx, l, blob.Workspace, subtree, func(n *Node) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := path.Join(prefix, string(n.Name))
		err := fn(p, n)
		if err == SkipDir {
			return nil
		}
		if err != nil || n.Type != TypeDir {
			return err
		}
		return Walk(ctx, l, n.Subtree, p, fn)
	})
}
