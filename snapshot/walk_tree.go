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
// root). Names come from DecodeTree, which has validated them. Trees are
// loaded ahead of the walk (TreesAhead): a batch at a time from a
// repository, so a walk over S3 costs a request per batch, not one per
// directory; what waits for the walk stays within WalkAheadBounds.
func Walk(ctx context.Context, l BlobLoader, subtree []blob.ID, prefix string, fn WalkFunc) error {
	ahead := NewTreesAhead(ctx, l, blob.Workspace, WalkAheadBounds, nil)
	defer ahead.Stop()
	return walk(ctx, ahead, subtree, prefix, fn)
}

func walk(ctx context.Context, ahead *TreesAhead, subtree []blob.ID, prefix string, fn WalkFunc) error {
	return ahead.LoadDir(ctx, subtree, func(n *Node) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := path.Join(prefix, string(n.Name))
		err := fn(p, n)
		if err == SkipDir {
			if n.Type == TypeDir {
				ahead.Forget(n.Subtree)
			}
			return nil
		}
		if err != nil || n.Type != TypeDir {
			return err
		}
		return walk(ctx, ahead, n.Subtree, p, fn)
	})
}
