package boxfiles

import (
	"context"
	"path/filepath"

	"lifeboat/providers"
	"lifeboat/providers/mirror"
)

// ReadFiles implements providers.Provider: the mirror CacheDir/<instance>
// is brought up to date. GNU find lists the workspace in the instance;
// entries that went or changed are removed from the mirror; GNU tar
// archives what must travel (directories and links as headers, regular
// files that differ in size, mtime or mode, are recent or have other
// names) and the archive is applied with tartree.Extract. Unchanged files
// keep their inodes, so capture's file cache skips them. The mirror keeps
// hard links, fifos, symlinks, modes, nanosecond mtimes and, when Lifeboat
// runs as root, owners; not xattrs. It stays locked against other
// ReadFiles of the instance until Close.
func (f *Files) ReadFiles(ctx context.Context, id providers.InstanceID) (providers.Files, error) {
	const op = "read files"
	unlock := f.locks.Lock(id)
	dir, err := f.readFiles(ctx, op, id)
	if err != nil {
		unlock()
		return nil, err
	}
	return mirror.NewFiles(dir, unlock), nil
}

func (f *Files) readFiles(ctx context.Context, op string, id providers.InstanceID) (string, error) {
	dir := filepath.Join(f.CacheDir, mirrorName(id))
	if err := f.sync(ctx, op, id, dir); err != nil {
		return "", err
	}
	return dir, nil
}
