package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/moby/moby/client"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
	"lifeboat/providers/mirror"
	"lifeboat/providers/tartree"
)

// ReadFiles implements providers.Provider: the workspace directory is
// read through the archive endpoint (GET /containers/{id}/archive, one
// tar stream; it works on running, paused and stopped containers) into
// the mirror CacheDir/<id>, extracted whole the first time and brought up
// to date in place after (see syncer and racyWindow): directories,
// regular files, symlinks, hard links, fifos, permission bits with
// setuid, setgid and sticky, whole-second mtimes (all the daemon's tar
// carries), and owners when Lifeboat runs as root. A device is mirrored
// as a node with device number 0 (capture records it, never stores it),
// which needs root: otherwise ReadFiles is KindUnsupported naming it.
// The daemon's tar carries no sockets and no user.* xattrs. The whole
// tree is transferred each time (the archive endpoint has no notion of
// changes); only what changed is written into the mirror. The mirror
// stays locked against other ReadFiles of the same instance until
// Files.Close.
func (p *Provider) ReadFiles(ctx context.Context, id providers.InstanceID) (providers.Files, error) {
	const op = "read files"
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	if _, err := p.needContainer(ctx, op, id); err != nil {
		return nil, err
	}
	unlock := p.locks.Lock(id)
	dir, err := p.pull(ctx, op, id)
	if err != nil {
		unlock()
		return nil, err
	}
	return mirror.NewFiles(dir, unlock), nil
}

// pull extracts the workspace into a fresh directory beside the mirror
// and renames it in place of the old one.
func (p *Provider) pull(ctx context.Context, op string, id providers.InstanceID) (string, error) {
	local := func(err error) error {
		return newErr(op, id, providers.KindUnavailable, "local mirror under %s: %w", p.cfg.CacheDir, err)
	}
	if err := os.MkdirAll(p.cfg.CacheDir, 0o700); err != nil {
		return "", local(err)
	}
	cache, err := os.OpenRoot(p.cfg.CacheDir)
	if err != nil {
		return "", local(err)
	}
	defer cache.Close()
	start := p.now()
	racy, trusted := takeState(cache, string(id))
	mirror, merr := cache.Lstat(string(id))
	incremental := trusted && p.sameClock && merr == nil && mirror.IsDir()
	fresh := "." + string(id) + ".new-" + randHex(8)
	if err := cache.Mkdir(fresh, 0o700); err != nil {
		return "", local(err)
	}
	defer fsmeta.RemoveTree(cache, fresh) // gone after the rename; removes a failed pull
	res, err := p.cli.CopyFromContainer(ctx, string(id), client.CopyFromContainerOptions{SourcePath: p.cfg.Workdir + "/."})
	if err != nil {
		if isNotFound(err) && !noSuchContainer(err) {
			return "", newErr(op, id, providers.KindConflict, "the workspace directory %s does not exist in container %s: create it in the image or the container (mkdir -p %s), or set the provider's workdir to the directory that holds the workspace", p.cfg.Workdir, id, p.cfg.Workdir)
		}
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	defer res.Content.Close()
	stop := context.AfterFunc(ctx, func() { res.Content.Close() })
	defer stop()
	where := fmt.Sprintf("the mirror of container %s", id)
	if incremental {
		dst, err := cache.OpenRoot(string(id))
		if err != nil {
			return "", local(err)
		}
		defer dst.Close()
		s := &syncer{dst: dst, chown: os.Geteuid() == 0, racy: racy, start: start, where: where}
		if err := s.run(ctx, res.Content); err != nil {
			return "", wrap(op, id, ctxErr(ctx, err))
		}
		if err := putState(cache, string(id), s.newRacy); err != nil {
			return "", local(err)
		}
		return p.mirrorDir(id), nil
	}
	dst, err := cache.OpenRoot(fresh)
	if err != nil {
		return "", local(err)
	}
	defer dst.Close()
	if err := tartree.Extract(ctx, res.Content, dst, tartree.ExtractOptions{Where: where, Owners: os.Geteuid() == 0, Provider: Name}); err != nil {
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	newRacy, err := racyEntries(dst, start)
	if err != nil {
		return "", local(err)
	}
	old := "." + string(id) + ".old-" + randHex(8)
	if err := cache.Rename(string(id), old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", local(err)
	}
	if err := cache.Rename(fresh, string(id)); err != nil {
		return "", local(err)
	}
	_ = fsmeta.RemoveTree(cache, old)
	if p.sameClock {
		if err := putState(cache, string(id), newRacy); err != nil {
			return "", local(err)
		}
	}
	return p.mirrorDir(id), nil
}

// stagingRE matches the staging paths WriteFiles makes.
var stagingRE = regexp.MustCompile(`^` + regexp.QuoteMeta(stagingDir) + `/[0-9a-f]{16}$`)

// WriteFiles implements providers.Provider: the tree src is sent as one
// tar stream (PUT /containers/{id}/archive) into a new directory
// /.lifeboat/staging/<random> in the container, keeping permission bits
// with setuid, setgid and sticky, mtimes, owners, hard links, symlinks
// and fifos (the daemon extracts them as root). A socket or a device in
// src is refused before anything is written (KindUnsupported naming it);
// an unreadable source entry is KindPermission naming it. WriteStarted is
// called right before the upload.
func (p *Provider) WriteFiles(ctx context.Context, id providers.InstanceID, src string) (string, error) {
	const op = "write files"
	if err := checkID(op, id); err != nil {
		return "", err
	}
	srcName := "the source tree " + src
	root, err := os.OpenRoot(src)
	if err != nil {
		return "", wrap(op, id, &fsmeta.EntryError{Verb: "read", Rel: ".", Where: srcName, Err: err})
	}
	defer root.Close()
	if err := fsmeta.ScanSource(ctx, root.FS(), Name, srcName, fsmeta.Uncreatable); err != nil {
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	if _, err := p.needContainer(ctx, op, id); err != nil {
		return "", err
	}
	staging := stagingDir + "/" + randHex(8)
	pr, pw := io.Pipe()
	srcErr := make(chan error, 1)
	go func() {
		err := writeDirs(pw, []string{strings.TrimPrefix(metaDir, "/"), strings.TrimPrefix(stagingDir, "/")}, 0o700)
		if err == nil {
			err = tartree.Write(ctx, root, pw, tartree.WriteOptions{Provider: Name, Where: srcName, Prefix: strings.TrimPrefix(staging, "/")})
		}
		srcErr <- err
		pw.CloseWithError(err)
	}()
	providers.WriteStarted(ctx)
	_, err = p.cli.CopyToContainer(ctx, string(id), client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	pr.CloseWithError(errors.New("upload ended"))
	if serr := <-srcErr; serr != nil && !errors.Is(serr, io.ErrClosedPipe) {
		err = serr // the source's failure explains the upload's
	}
	if err != nil {
		p.removeQuietly(id, staging)
		if noSuchContainer(err) {
			return "", newErr(op, id, providers.KindConflict, "container %s disappeared during the upload (Inspect confirms whether it is missing)", id)
		}
		if code := refusedExtraction(err); code != "" {
			e := newErr(op, id, providers.KindPermission, "container %s refused a write while the daemon extracted the upload into %s (%v); fix the permissions there (retrying will not help)", id, staging, err).(*providers.Error)
			e.Code = code
			return "", e
		}
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	return staging, nil
}

// refusedExtraction is the errno of a daemon's failure to extract an
// upload because the container's filesystem refused it ("Error processing
// tar file(exit status 1): lchown /x: operation not permitted"), or "".
func refusedExtraction(err error) string {
	msg := err.Error()
	if !strings.Contains(msg, "Error processing tar file") {
		return ""
	}
	switch {
	case strings.Contains(msg, "operation not permitted"):
		return "EPERM"
	case strings.Contains(msg, "permission denied"):
		return "EACCES"
	}
	return ""
}

// removeQuietly removes a path in the container through exec, on its own
// short context; failures are ignored (staging under /.lifeboat is
// harmless and the next Switch or Destroy clears it).
func (p *Provider) removeQuietly(id providers.InstanceID, target string) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
	defer cancel()
	_, _ = p.exec(ctx, id, []string{"rm", "-rf", "--", target}, nil)
}

// switchScript moves the workspace aside, the staging tree in its place,
// and removes the old tree; when the second move fails the old tree goes
// back. Exit 0: switched; 13: switched but the old tree is left at $3.
const switchScript = `set -u
s="$1"; w="$2"; old="$3"
[ -d "$s" ] || { echo "staging $s is not a directory" >&2; exit 10; }
mkdir -p "$(dirname "$old")" || exit 11
if [ -e "$w" ] || [ -L "$w" ]; then mv -f "$w" "$old" || exit 11; fi
if ! mv "$s" "$w"; then
	[ -e "$old" ] && mv "$old" "$w"
	exit 12
fi
rm -rf "$old" || exit 13
exit 0
`

// Switch implements providers.Provider: a shell in the container (the
// image needs sh, mv and rm) moves the workspace aside, the staging tree
// in its place, and removes the old tree. On overlayfs without
// redirect_dir a workspace directory that came with the image is copied
// aside rather than renamed; an error leaves the workspace as it was.
// WriteStarted is called right before the shell runs.
func (p *Provider) Switch(ctx context.Context, id providers.InstanceID, staging string) error {
	const op = "switch"
	if err := checkID(op, id); err != nil {
		return err
	}
	if !stagingRE.MatchString(staging) {
		return newErr(op, id, providers.KindInvalid, "%q is not a staging directory this adapter made (%s/<16 hex digits>)", staging, stagingDir)
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	if err := p.needRunning(ctx, op, id); err != nil {
		return err
	}
	if _, err := p.cli.ContainerStatPath(ctx, string(id), client.ContainerStatPathOptions{Path: staging}); err != nil {
		if isNotFound(err) && !noSuchContainer(err) {
			return newErr(op, id, providers.KindInvalid, "staging directory %s does not exist in container %s", staging, id)
		}
		return wrap(op, id, ctxErr(ctx, err))
	}
	old := path.Join(switchingDir, randHex(8))
	providers.WriteStarted(ctx)
	res, err := p.exec(ctx, id, []string{"sh", "-c", switchScript, "switch", staging, p.cfg.Workdir, old}, nil)
	if err != nil {
		return wrap(op, id, err)
	}
	switch res.ExitCode {
	case 0, 13:
		return nil
	case 12:
		return newErr(op, id, providers.KindConflict, "moving %s to %s in container %s failed; the workspace was put back: %s", staging, p.cfg.Workdir, id, firstLine(res.Stderr))
	}
	return newErr(op, id, providers.KindConflict, "switching %s into %s in container %s failed (exit %d): %s", staging, p.cfg.Workdir, id, res.ExitCode, firstLine(res.Stderr))
}

// FileSupport implements providers.FileSupporter: the daemon's tar keeps
// hard links and fifos both ways, and owners where Lifeboat runs as root
// (the mirror is written by this process); it carries no user.* xattrs
// and no holes.
func (p *Provider) FileSupport(ctx context.Context) (providers.FileSupport, error) {
	return providers.FileSupport{HardLinks: true, Fifos: true, Ownership: os.Geteuid() == 0}, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// writeDirs writes tar entries for directories (no end marker: more
// entries follow).
func writeDirs(w io.Writer, dirs []string, mode int64) error {
	tw := tar.NewWriter(w)
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// dirsTar is a whole tar stream of directories.
func dirsTar(dirs []string, mode int64) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		for _, d := range dirs {
			if err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, Format: tar.FormatPAX}); err != nil {
				break
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}
