package boxfiles

import (
	"context"
	"fmt"
	"os"
	"path"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
	"lifeboat/providers/tartree"
)

// extractScript unpacks $1/tmp/$2.tar into the new directory
// $1/staging/$2 and removes the archive; on failure the partial tree goes.
const extractScript = `s="$1/staging/$2"; t="$1/tmp/$2.tar"
mkdir -p "$1/staging" && mkdir "$s" && tar --extract --preserve-permissions --numeric-owner --file "$t" -C "$s"
r=$?; rm -f "$t"
if [ $r -ne 0 ]; then chmod -R u+rwx "$s" 2>/dev/null; rm -rf "$s"; fi
exit $r`

// WriteFiles implements providers.Provider: the tree src is checked for
// entries no sandbox gets (sockets, devices: KindUnsupported, nothing
// written), archived locally (tartree.Write), uploaded and unpacked by GNU
// tar into a new staging directory, whose absolute path is returned.
// WriteStarted is called once the instance has answered and before the
// first change in it.
func (f *Files) WriteFiles(ctx context.Context, id providers.InstanceID, src string) (string, error) {
	const op = "write files"
	where := "the source tree " + src
	root, err := os.OpenRoot(src)
	if err != nil {
		return "", f.local(op, id, fmt.Errorf("%s: %w", where, err))
	}
	defer root.Close()
	if err := fsmeta.ScanSource(ctx, root.FS(), f.Provider, where, fsmeta.Uncreatable); err != nil {
		return "", f.local(op, id, err)
	}
	if err := os.MkdirAll(f.CacheDir, 0o700); err != nil {
		return "", f.err(op, id, providers.KindUnavailable, "local directory %s: %w", f.CacheDir, err)
	}
	tmp, err := os.CreateTemp(f.CacheDir, ".upload-*")
	if err != nil {
		return "", f.err(op, id, providers.KindUnavailable, "local directory %s: %w", f.CacheDir, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := tartree.Write(ctx, root, tmp, tartree.WriteOptions{Where: where, Provider: f.Provider}); err != nil {
		return "", f.local(op, id, err)
	}
	size, err := tmp.Seek(0, 1)
	if err == nil {
		_, err = tmp.Seek(0, 0)
	}
	if err != nil {
		return "", f.local(op, id, err)
	}
	// The instance must answer before anything is changed in it.
	if _, err := f.Box.Run(ctx, id, f.Layout.Parent(), []string{"true"}); err != nil {
		return "", err
	}
	name := TmpName("w")
	providers.WriteStarted(ctx)
	if err := f.run(ctx, op, id, f.Layout.Parent(), "mkdir", "mkdir", "-p", f.Layout.Area()+"/tmp"); err != nil {
		return "", err
	}
	if err := f.Box.Upload(ctx, id, path.Join(f.Layout.Parent(), f.Layout.Area(), "tmp", name+".tar"), tmp, size); err != nil {
		return "", err
	}
	if err := f.run(ctx, op, id, f.Layout.Parent(), "tar --extract", "sh", "-c", extractScript, "lifeboat", f.Layout.Area(), name); err != nil {
		return "", err
	}
	return f.Layout.Staging(name), nil
}
