package s3

import (
	"context"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"

	"lifeboat/backend"
)

// List calls fn for every object of type t. Keys that are not valid
// handle names, and packs outside their shard, are skipped.
func (b *Backend) List(ctx context.Context, t backend.FileType, fn func(backend.FileInfo) error) error {
	if err := backend.CheckList(ctx, "s3", t); err != nil {
		return err
	}
	if t == backend.Config {
		return backend.ListConfig(ctx, b, fn)
	}
	ctx, cancel := context.WithCancel(ctx) // stops the listing goroutine when fn fails
	defer cancel()
	dir := b.dir(t)
	for obj := range b.client.ListObjects(ctx, b.loc.Bucket, minio.ListObjectsOptions{Prefix: dir, Recursive: true}) {
		if obj.Err != nil {
			return b.fail("list", listing(trimmed(dir)), obj.Err)
		}
		rel := strings.TrimPrefix(obj.Key, dir)
		name := rel
		if t == backend.Pack {
			shard, rest, ok := strings.Cut(rel, "/")
			if !ok || len(shard) != 2 || !strings.HasPrefix(rest, shard) {
				continue
			}
			name = rest
		}
		if (backend.Handle{Type: t, Name: name}).Valid() != nil {
			continue
		}
		if err := fn(backend.FileInfo{Name: name, Size: obj.Size}); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3: list %s: %w", t, err)
	}
	return nil
}

// listing names a key prefix in messages.
type listing string

func (l listing) String() string { return string(l) + "/" }

// Remove deletes h. S3 answers a DELETE of a missing object like any
// other, so Remove of a missing file succeeds here (backend.Backend
// allows nil or ErrNotFound).
func (b *Backend) Remove(ctx context.Context, h backend.Handle) error {
	if err := check(ctx, "remove", h); err != nil {
		return err
	}
	if err := b.client.RemoveObject(ctx, b.loc.Bucket, b.key(h), minio.RemoveObjectOptions{}); err != nil {
		return b.fail("remove", h, err)
	}
	return nil
}
