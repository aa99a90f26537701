package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"lifeboat/backend"
)

// List calls fn for every valid file of type t. Temp files, names that
// are not valid handles, non-regular files and packs in the wrong shard
// are skipped. A file removed during the listing is skipped too.
func (b *Backend) List(ctx context.Context, t backend.FileType, fn func(backend.FileInfo) error) error {
	if err := backend.CheckList(ctx, "local", t); err != nil {
		return err
	}
	switch t {
	case backend.Config:
		return backend.ListConfig(ctx, b, fn)
	case backend.Pack:
		dir := filepath.Join(b.dir, string(t))
		shards, err := readDir(dir)
		if err != nil {
			return fmt.Errorf("local: list %s: %w", t, err)
		}
		for _, s := range shards {
			if !s.IsDir() || len(s.Name()) != 2 {
				continue
			}
			if err := b.listDir(ctx, t, filepath.Join(dir, s.Name()), s.Name(), fn); err != nil {
				return err
			}
		}
		return nil
	default:
		return b.listDir(ctx, t, filepath.Join(b.dir, string(t)), "", fn)
	}
}

// listDir lists the files of type t in dir whose names start with prefix.
func (b *Backend) listDir(ctx context.Context, t backend.FileType, dir, prefix string, fn func(backend.FileInfo) error) error {
	entries, err := readDir(dir)
	if err != nil {
		return fmt.Errorf("local: list %s: %w", t, err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("local: list %s: %w", t, err)
		}
		name := e.Name()
		if (backend.Handle{Type: t, Name: name}).Valid() != nil || name[:len(prefix)] != prefix || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("local: list %s: %w", t, err)
		}
		if err := fn(backend.FileInfo{Name: name, Size: fi.Size()}); err != nil {
			return err
		}
	}
	return nil
}

// readDir reads dir; a missing dir is empty.
func readDir(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(filepath.Dir(dir)); serr != nil {
			return nil, err // the repository itself is gone
		}
		return nil, nil
	}
	return entries, err
}

// Remove deletes h and fsyncs its directory so the removal is durable.
func (b *Backend) Remove(ctx context.Context, h backend.Handle) error {
	if err := check(ctx, "remove", h); err != nil {
		return err
	}
	p := b.path(h)
	if err := os.Remove(p); err != nil {
		return b.fail("remove", h, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return b.fail("remove", h, err)
	}
	return nil
}
