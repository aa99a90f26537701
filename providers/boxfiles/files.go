package boxfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"lifeboat/internal/keylock"
	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// Files implements ReadFiles, WriteFiles, Switch, Exec and FileSupport for
// one adapter over its Box; adapters embed it.
type Files struct {
	Provider string // the adapter's name, for errors
	Box      Box
	Layout   Layout
	CacheDir string // local mirrors, one directory per instance

	locks keylock.Map[providers.InstanceID] // instance -> held while its mirror is in use
}

// DropMirror removes id's local mirror, for the adapters' Destroy; a
// mirror a ReadFiles still holds is left (the next ReadFiles replaces it).
func (f *Files) DropMirror(id providers.InstanceID) {
	f.locks.IfUnlocked(id, func() { _ = removeLocal(filepath.Join(f.CacheDir, mirrorName(id))) })
}

// maxStdin bounds what Exec sends as a command's standard input.
const maxStdin = 64 << 20

func (f *Files) err(op string, id providers.InstanceID, k providers.Kind, format string, args ...any) error {
	return &providers.Error{Provider: f.Provider, Op: op, Instance: id, Kind: k, Err: fmt.Errorf(format, args...)}
}

// failed turns a non-zero exit of a command run in dir into an error:
// KindPermission when its stderr says an access was refused, else
// KindConflict; the message carries the command's own words (paths in
// them are relative to dir).
func (f *Files) failed(op string, id providers.InstanceID, dir, what string, res providers.ExecResult) error {
	msg := strings.TrimSpace(string(res.Stderr))
	k := providers.KindConflict
	if strings.Contains(msg, "Permission denied") || strings.Contains(msg, "Operation not permitted") {
		k = providers.KindPermission
		msg += "; fix the permissions there (retrying will not help)"
	}
	return f.err(op, id, k, "%s (run in %s) exited %d: %s", what, dir, res.ExitCode, msg)
}

// run runs argv in dir and fails unless it exits 0.
func (f *Files) run(ctx context.Context, op string, id providers.InstanceID, dir, what string, argv ...string) error {
	res, err := f.Box.Run(ctx, id, dir, argv)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return f.failed(op, id, dir, what, res)
	}
	return nil
}

// FileSupport implements providers.FileSupporter: GNU tar in the sandbox
// keeps hard links and fifos; xattrs, owners and holes are not claimed.
func (f *Files) FileSupport(context.Context) (providers.FileSupport, error) {
	return providers.FileSupport{HardLinks: true, Fifos: true}, nil
}

// mirrorName is the local directory name of id's mirror.
func mirrorName(id providers.InstanceID) string {
	if providers.ValidName(string(id)) {
		return string(id)
	}
	return providers.KeyedName("mirror " + string(id))
}

// Exec implements providers.Provider: argv runs with the workspace as its
// working directory; stdin, when given, is uploaded to a file first (at
// most 64 MiB) and redirected.
func (f *Files) Exec(ctx context.Context, id providers.InstanceID, argv []string, stdin io.Reader) (providers.ExecResult, error) {
	const op = "exec"
	if err := providers.CheckCommand(f.Provider, op, id, argv); err != nil {
		return providers.ExecResult{}, err
	}
	if stdin == nil {
		return f.Box.Run(ctx, id, f.Layout.Workspace, argv)
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxStdin+1))
	if err != nil {
		return providers.ExecResult{}, f.err(op, id, providers.KindInvalid, "reading the command's stdin: %w", err)
	}
	if len(b) > maxStdin {
		return providers.ExecResult{}, f.err(op, id, providers.KindInvalid, "the command's stdin is larger than %d bytes", maxStdin)
	}
	name := TmpName("stdin")
	if err := f.run(ctx, op, id, f.Layout.Parent(), "mkdir", "mkdir", "-p", f.Layout.Area()+"/tmp"); err != nil {
		return providers.ExecResult{}, err
	}
	if err := f.Box.Upload(ctx, id, path.Join(f.Layout.Parent(), f.Layout.Area(), "tmp", name), bytes.NewReader(b), int64(len(b))); err != nil {
		return providers.ExecResult{}, err
	}
	wrapped := append([]string{"sh", "-c", `f=$1; shift; "$@" <"$f"; s=$?; rm -f "$f"; exit $s`, "lifeboat",
		"../" + f.Layout.Area() + "/tmp/" + name}, argv...)
	return f.Box.Run(ctx, id, f.Layout.Workspace, wrapped)
}

// kindOf is the Kind of a local failure while copying a tree.
func kindOf(err error) providers.Kind {
	var cc *fsmeta.CannotCreate
	switch {
	case errors.As(err, &cc):
		return providers.KindUnsupported
	case fsmeta.IsPermission(err):
		return providers.KindPermission
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return providers.KindUnavailable
	}
	return providers.KindUnavailable
}

func (f *Files) local(op string, id providers.InstanceID, err error) error {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return err
	}
	return &providers.Error{Provider: f.Provider, Op: op, Instance: id, Kind: kindOf(err), Err: err}
}

// removeLocal removes a local tree, read-only directories included.
func removeLocal(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// MakeWorkspace makes the workspace directory of a new instance, and its
// parents (mkdir -p from /, by a relative path like every command), for
// the adapters' Create.
func (f *Files) MakeWorkspace(ctx context.Context, op string, id providers.InstanceID) error {
	return f.run(ctx, op, id, "/", "making the workspace "+f.Layout.Workspace, "mkdir", "-p", strings.TrimPrefix(f.Layout.Workspace, "/"))
}

// Init sets f up for the HTTP adapter name over box: workspace must pass
// CheckWorkspace, and cacheDir, which holds the local mirrors (in
// cacheDir/mirrors), is required; errors start with name.
func (f *Files) Init(name string, box Box, workspace, cacheDir string) error {
	if cacheDir == "" {
		return errors.New(name + ": a cache directory is required")
	}
	if err := CheckWorkspace(workspace); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	f.Provider, f.Box, f.Layout, f.CacheDir = name, box, Layout{Workspace: filepath.Clean(workspace)}, filepath.Join(cacheDir, "mirrors")
	return nil
}

// CheckWorkspace says what is wrong with w as a workspace directory: it
// must be absolute and not "/", and its last name must not start with "-"
// (the sandbox's find, tar and mv are given it as an argument and would
// read it as an option).
func CheckWorkspace(w string) error {
	if !strings.HasPrefix(w, "/") || path.Clean(w) == "/" {
		return fmt.Errorf("the workspace %q must be an absolute directory other than /", w)
	}
	if strings.HasPrefix(path.Base(w), "-") {
		return fmt.Errorf("the workspace %q: its last name starts with -, which the sandbox's find and mv would read as an option; rename it", w)
	}
	return nil
}
