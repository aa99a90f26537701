package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
	"lifeboat/providers/tartree"
)

// lifeboatDir holds the adapter's own files in the sandbox, relative to
// the user's home: uploads, staging directories, trees being switched.
const lifeboatDir = ".lifeboat"

// stagingName is the name WriteFiles gives a staging directory.
var stagingName = regexp.MustCompile(`^w-[0-9a-f]{16}$`)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// FileSupport implements providers.FileSupporter. Trees travel as tar
// archives through GNU tar in the sandbox: hard links and fifos survive;
// xattrs are not sent (E2B's filesystems and GNU tar's --xattrs are not
// relied on), holes are written as zeros, and files belong to
// Config.User. The sandbox's template must have GNU tar and coreutils
// (E2B's default templates do).
func (p *Provider) FileSupport(context.Context) (providers.FileSupport, error) {
	return providers.FileSupport{HardLinks: true, Fifos: true}, nil
}

// extractScript unpacks the uploaded archive $1 into the new staging
// directory $2 and removes the archive; on failure it removes what it
// made.
const extractScript = `t=$1; st=$2
mkdir -p "$st" || exit 10
tar -x -p -f "$t" -C "$st"; rc=$?
rm -f "$t"
if [ $rc -ne 0 ]; then chmod -R u+w "$st" 2>/dev/null; rm -rf "$st"; exit $rc; fi`

// WriteFiles implements providers.Provider: sockets and devices in src are
// refused before anything is sent; the tree is packed into a local
// temporary archive (source errors name the entry, before any change in
// the sandbox), uploaded to <home>/.lifeboat/upload.* and extracted by
// GNU tar into <home>/.lifeboat/staging/w-*. providers.WriteStarted is
// called right before the upload.
func (p *Provider) WriteFiles(ctx context.Context, id providers.InstanceID, src string) (string, error) {
	const op = "write files"
	sr, err := os.OpenRoot(src)
	if err != nil {
		return "", &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindInvalid, Err: fmt.Errorf("source directory %s cannot be opened: %w", src, err)}
	}
	defer sr.Close()
	srcName := "the source tree " + src
	rel, typ, err := fsmeta.Find(ctx, sr.FS(), fsmeta.Uncreatable)
	if err != nil {
		return "", p.local(op, id, &fsmeta.EntryError{Verb: "read", Rel: tartree.PathOf(err, "."), Where: srcName, Err: err})
	}
	if rel != "" {
		return "", p.local(op, id, &fsmeta.CannotCreate{Provider: Name, Rel: rel, Type: typ, Where: srcName})
	}
	e, err := p.envd(ctx, op, id)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TransferTimeout)
	defer cancel()
	if err := os.MkdirAll(p.cfg.CacheDir, 0o700); err != nil {
		return "", p.local(op, id, err)
	}
	archive, err := os.CreateTemp(p.cfg.CacheDir, "upload-*.tar")
	if err != nil {
		return "", p.local(op, id, err)
	}
	defer os.Remove(archive.Name())
	defer archive.Close()
	if err := tartree.Write(ctx, sr, archive, tartree.WriteOptions{Where: srcName, Provider: Name}); err != nil {
		return "", p.local(op, id, err)
	}
	if _, err := archive.Seek(0, 0); err != nil {
		return "", p.local(op, id, err)
	}
	tag := randHex(8)
	upload := lifeboatDir + "/upload." + tag + ".tar"
	staging := lifeboatDir + "/staging/w-" + tag
	providers.WriteStarted(ctx)
	if err := e.upload(ctx, op, upload, archive); err != nil {
		return "", err
	}
	res, err := e.run(ctx, op, ".", []string{"/bin/sh", "-c", extractScript, "sh", upload, staging})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", e.scriptFailed(op, "extracting the tree into "+e.abs(staging), res)
	}
	return e.abs(staging), nil
}

// switchScript puts staging $2 in place of the workspace $1, parking the
// old tree at $3 and undoing that if the second rename fails.
const switchScript = `ws=$1; st=$2; old=$3
[ -d "$st" ] || { echo "staging directory $st does not exist" >&2; exit 3; }
mkdir -p "$(dirname "$old")" "$(dirname "$ws")" || exit 10
if [ -e "$old" ] || [ -L "$old" ]; then chmod -R u+w "$old" 2>/dev/null; rm -rf "$old" || exit 10; fi
moved=0
if [ -e "$ws" ] || [ -L "$ws" ]; then mv -T "$ws" "$old" || exit 10; moved=1; fi
if ! mv -T "$st" "$ws"; then
	if [ $moved = 1 ]; then mv -T "$old" "$ws" || exit 5; fi
	exit 4
fi
if [ $moved = 1 ]; then chmod -R u+w "$old" 2>/dev/null; rm -rf "$old"; fi
exit 0`

// Switch implements providers.Provider with two renames in the sandbox
// (mv -T, i.e. rename(2)): the workspace to <home>/.lifeboat/switching/*,
// then staging into its place; if the second fails the first is undone.
// Between the two the workspace path is briefly absent. The old tree is
// removed once the new one is in place. providers.WriteStarted is called
// right before the script runs.
func (p *Provider) Switch(ctx context.Context, id providers.InstanceID, staging string) error {
	const op = "switch"
	dir, name := path.Split(path.Clean(staging))
	if path.Clean(dir) != path.Join(p.cfg.Home, lifeboatDir, "staging") || !stagingName.MatchString(name) {
		return &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindInvalid,
			Err: fmt.Errorf("%s is not a staging directory WriteFiles made (under %s)", staging, path.Join(p.cfg.Home, lifeboatDir, "staging"))}
	}
	e, err := p.envd(ctx, op, id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TransferTimeout)
	defer cancel()
	providers.WriteStarted(ctx)
	res, err := e.run(ctx, op, ".", []string{"/bin/sh", "-c", switchScript, "sh", p.cfg.Workspace, lifeboatDir + "/staging/" + name,
		lifeboatDir + "/switching/" + randHex(8)})
	if err != nil {
		return err
	}
	switch res.ExitCode {
	case 0:
		return nil
	case 3:
		return e.fail(op, providers.KindInvalid, "staging directory %s does not exist (already switched, or not made by WriteFiles)", staging)
	case 5:
		return e.fail(op, providers.KindUnavailable, "switch failed and undoing it failed too: the old tree is under %s: %s",
			e.abs(lifeboatDir+"/switching"), firstLine(string(res.Stderr)))
	}
	return e.scriptFailed(op, "switching "+staging+" into place", res)
}

// packScript packs the workspace $1 (an empty archive when there is none)
// into $2. GNU tar exits 1 when a file changed while it was read: the
// archive is still whole.
const packScript = `ws=$1; out=$2
mkdir -p "$(dirname "$out")" || exit 10
if [ -d "$ws" ]; then tar -c -f "$out" --format=posix --numeric-owner -C "$ws" .; else tar -c -f "$out" --format=posix -T /dev/null; fi
rc=$?; [ $rc -eq 1 ] && rc=0
[ $rc -ne 0 ] && rm -f "$out"
exit $rc`

// mirror is a local copy of a workspace made by ReadFiles.
type mirror struct {
	cache *os.Root
	name  string
	dir   string
}

func (m *mirror) Dir() string { return m.dir }

func (m *mirror) Close() error {
	err := fsmeta.RemoveTree(m.cache, m.name)
	m.cache.Close()
	return err
}

// ReadFiles implements providers.Provider: GNU tar in the sandbox packs
// the workspace into <home>/.lifeboat/read.*.tar, which is downloaded,
// extracted into a new directory under Config.CacheDir, and removed from
// the sandbox. The whole tree travels on every call. Owners and xattrs
// are not kept in the copy.
func (p *Provider) ReadFiles(ctx context.Context, id providers.InstanceID) (providers.Files, error) {
	const op = "read files"
	e, err := p.envd(ctx, op, id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TransferTimeout)
	defer cancel()
	archive := lifeboatDir + "/read." + randHex(8) + ".tar"
	res, err := e.run(ctx, op, ".", []string{"/bin/sh", "-c", packScript, "sh", p.cfg.Workspace, archive})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, e.scriptFailed(op, "packing the workspace "+e.abs(p.cfg.Workspace), res)
	}
	defer func() {
		// The archive is ours: remove it whatever happened (best effort).
		_, _ = e.run(context.WithoutCancel(ctx), op, ".", []string{"rm", "-f", archive})
	}()
	body, err := e.download(ctx, op, archive)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if err := os.MkdirAll(p.cfg.CacheDir, 0o700); err != nil {
		return nil, p.local(op, id, err)
	}
	dir, err := os.MkdirTemp(p.cfg.CacheDir, "read-*")
	if err != nil {
		return nil, p.local(op, id, err)
	}
	cache, err := os.OpenRoot(p.cfg.CacheDir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, p.local(op, id, err)
	}
	m := &mirror{cache: cache, name: filepath.Base(dir), dir: dir}
	dst, err := cache.OpenRoot(m.name)
	if err == nil {
		err = tartree.Extract(ctx, body, dst, tartree.ExtractOptions{Where: "the local copy " + dir + " of " + string(id)})
		dst.Close()
	}
	if err != nil {
		_ = m.Close()
		if ctx.Err() != nil {
			return nil, e.fail(op, providers.KindUnavailable, "downloading the workspace: %w", ctx.Err())
		}
		return nil, p.local(op, id, err)
	}
	return m, nil
}

// local turns a failure on this side (the source tree, the local copy)
// into a *providers.Error: an access refusal is KindPermission, an entry
// that cannot be created KindUnsupported, anything else KindUnavailable.
func (p *Provider) local(op string, id providers.InstanceID, err error) error {
	k := providers.KindUnavailable
	var cc *fsmeta.CannotCreate
	switch {
	case errors.As(err, &cc):
		k = providers.KindUnsupported
	case fsmeta.IsPermission(err):
		k = providers.KindPermission
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		k = providers.KindUnavailable
	}
	return &providers.Error{Provider: Name, Op: op, Instance: id, Kind: k, Err: err}
}

// scriptFailed is the error for one of the adapter's scripts exiting
// non-zero: GNU tar's "Permission denied" is KindPermission naming the
// path, anything else KindUnavailable with the first line of stderr.
func (e *envd) scriptFailed(op, what string, res providers.ExecResult) error {
	stderr := string(res.Stderr)
	if rel := deniedPath(stderr); rel != "" {
		return &providers.Error{Provider: Name, Op: op, Instance: e.id, Kind: providers.KindPermission, Code: "EACCES",
			Err: fmt.Errorf("%s: %s: permission denied in the sandbox; fix the permissions there (retrying will not help)", what, rel)}
	}
	return e.fail(op, providers.KindUnavailable, "%s failed (exit %d): %s", what, res.ExitCode, firstLine(stderr))
}

// deniedPath is the path in a GNU tool's "X: Cannot open: Permission
// denied" message, or "".
func deniedPath(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, "Permission denied") {
			continue
		}
		line = strings.TrimPrefix(line, "tar: ")
		if i := strings.Index(line, ": "); i > 0 {
			return line[:i]
		}
	}
	return ""
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "(no message)"
	}
	return s
}
