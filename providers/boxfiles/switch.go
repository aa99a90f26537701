package boxfiles

import (
	"context"
	"path"

	"lifeboat/providers"
)

// switchScript puts staging $2/staging/$3 in place of the workspace $1:
// one exchange where mv has --exchange, else two renames with the old
// tree put back if the second fails. Exit 3: no such staging tree.
const switchScript = `w=$1; s="$2/staging/$3"; o="$2/old/$3"
[ -d "$s" ] || { echo "staging tree $s does not exist" >&2; exit 3; }
if [ -d "$w" ] && mv --exchange -T "$s" "$w" 2>/dev/null; then chmod -R u+rwx "$s" 2>/dev/null; rm -rf "$s"; exit 0; fi
mkdir -p "$2/old" || exit 4
if [ -e "$w" ] || [ -L "$w" ]; then mv -T "$w" "$o" || exit 4; fi
if ! mv -T "$s" "$w"; then if [ -e "$o" ]; then mv -T "$o" "$w"; fi; exit 5; fi
chmod -R u+rwx "$o" 2>/dev/null; rm -rf "$o"; exit 0`

// Switch implements providers.Provider: staging must be a path WriteFiles
// returned (else KindInvalid, nothing touched).
func (f *Files) Switch(ctx context.Context, id providers.InstanceID, staging string) error {
	const op = "switch"
	n := path.Base(staging)
	if !providers.ValidName(n) || staging != f.Layout.Staging(n) {
		return f.err(op, id, providers.KindInvalid, "%q is not a staging directory this adapter made (want %s)", staging, f.Layout.Staging("NAME"))
	}
	providers.WriteStarted(ctx)
	res, err := f.Box.Run(ctx, id, f.Layout.Parent(), []string{"sh", "-c", switchScript, "lifeboat", f.Layout.Base(), f.Layout.Area(), n})
	if err != nil {
		return err
	}
	switch res.ExitCode {
	case 0:
		return nil
	case 3:
		return f.err(op, id, providers.KindInvalid, "staging directory %s does not exist in the instance", staging)
	}
	return f.failed(op, id, f.Layout.Parent(), "switching the workspace", res)
}
