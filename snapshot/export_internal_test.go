package snapshot

import (
	"context"
	"errors"

	"lifeboat/blob"
	"lifeboat/repo"
)

// FailExportWalkForTest makes the walk ahead of an export fail to read
// the listing blob id (the copy's own walk still reads it); undo puts the
// loader back. A test that calls it must not run in parallel.
func FailExportWalkForTest(id blob.ID) (undo func()) {
	old := exportWalkLoader
	exportWalkLoader = func(r *repo.Repository) BlobLoader { return failingTree{r, id} }
	return func() { exportWalkLoader = old }
}

type failingTree struct {
	l  BlobLoader
	id blob.ID
}

func (f failingTree) LoadBlob(ctx context.Context, t blob.Tier, typ blob.Type, id blob.ID, buf []byte) ([]byte, error) {
	if id == f.id {
		return nil, errors.New("the walk ahead cannot read this listing")
	}
	return f.l.LoadBlob(ctx, t, typ, id, buf)
}

// ExportChunksForTest runs an export's walk ahead over subtree of src's
// workspace tier, sending the chunks it lists to out, and returns its
// error.
func ExportChunksForTest(ctx context.Context, src *repo.Repository, subtree []blob.ID, out chan<- []blob.ID) error {
	x := &exporter{ctx: ctx, src: src, trees: map[string][]blob.ID{}}
	return x.chunks(ctx, blob.Workspace, subtree, map[string]bool{}, out)
}
