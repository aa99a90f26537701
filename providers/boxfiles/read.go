package boxfiles

import (
	"context"
	"os"
	"path"
	"path/filepath"

	"lifeboat/providers"
	"lifeboat/providers/tartree"
)

// readScript archives the workspace ($1) into $2/tmp/$3; GNU tar's exit 1
// ("file changed as we read it") still leaves a complete archive.
const readScript = `mkdir -p "$2/tmp" || exit 2
tar --create --format=posix --numeric-owner --file "$2/tmp/$3" -C "$1" .
r=$?; [ $r -le 1 ] || rm -f "$2/tmp/$3"; exit $r`

type mirrorFiles struct {
	dir    string
	unlock func()
}

func (m *mirrorFiles) Dir() string { return m.dir }
func (m *mirrorFiles) Close() error {
	if m.unlock != nil {
		m.unlock()
		m.unlock = nil
	}
	return nil
}

// ReadFiles implements providers.Provider: GNU tar archives the workspace
// in the instance, the archive is downloaded and unpacked into a fresh
// local tree that replaces CacheDir/<instance> whole. The mirror keeps
// what tartree.Extract keeps (hard links, fifos, symlinks, modes,
// nanosecond mtimes; not owners or xattrs) and stays locked against other
// ReadFiles of the instance until Close.
func (f *Files) ReadFiles(ctx context.Context, id providers.InstanceID) (providers.Files, error) {
	const op = "read files"
	l := f.lock(id)
	l.Lock()
	unlock := l.Unlock
	dir, err := f.readFiles(ctx, op, id)
	if err != nil {
		unlock()
		return nil, err
	}
	return &mirrorFiles{dir: dir, unlock: unlock}, nil
}

func (f *Files) readFiles(ctx context.Context, op string, id providers.InstanceID) (string, error) {
	name := TmpName("read") + ".tar"
	res, err := f.Box.Run(ctx, id, f.Layout.Parent(), []string{"sh", "-c", readScript, "lifeboat", f.Layout.Base(), f.Layout.Area(), name})
	if err != nil {
		return "", err
	}
	if res.ExitCode > 1 {
		return "", f.failed(op, id, f.Layout.Parent(), "tar --create", res)
	}
	remote := path.Join(f.Layout.Parent(), f.Layout.Area(), "tmp", name)
	defer func() {
		_, _ = f.Box.Run(context.WithoutCancel(ctx), id, f.Layout.Parent(), []string{"rm", "-f", remote})
	}()
	if err := os.MkdirAll(f.CacheDir, 0o700); err != nil {
		return "", f.err(op, id, providers.KindUnavailable, "local mirror directory %s: %w", f.CacheDir, err)
	}
	tmp, err := os.CreateTemp(f.CacheDir, ".download-*")
	if err != nil {
		return "", f.err(op, id, providers.KindUnavailable, "local mirror directory %s: %w", f.CacheDir, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := f.Box.Download(ctx, id, remote, tmp); err != nil {
		return "", err
	}
	if _, err := tmp.Seek(0, 0); err != nil {
		return "", f.local(op, id, err)
	}
	fresh, err := os.MkdirTemp(f.CacheDir, ".fresh-*")
	if err != nil {
		return "", f.local(op, id, err)
	}
	root, err := os.OpenRoot(fresh)
	if err == nil {
		err = tartree.Extract(ctx, tmp, root, tartree.ExtractOptions{Where: "the local mirror of instance " + string(id)})
		root.Close()
	}
	if err != nil {
		_ = removeLocal(fresh)
		return "", f.local(op, id, err)
	}
	dir := filepath.Join(f.CacheDir, mirrorName(id))
	if err := removeLocal(dir); err != nil {
		_ = removeLocal(fresh)
		return "", f.local(op, id, err)
	}
	if err := os.Rename(fresh, dir); err != nil {
		_ = removeLocal(fresh)
		return "", f.local(op, id, err)
	}
	return dir, nil
}
