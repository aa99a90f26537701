package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pkg/sftp"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
	"lifeboat/providers/tartree"
)

// WriteFiles implements providers.Provider: src (read through an os.Root,
// its symlinks copied as links) is written into a new directory
// <root>/.lifeboat/staging/<id>.write.<random> on the host, the same
// filesystem as the instance, whose remote path is returned.
//
// Where the host has GNU tar (see FileSupport), the tree goes as one PAX
// tar stream into `tar -x -p --numeric-owner [--xattrs]` run in the
// staging directory, which keeps hard links, fifos, user.* xattrs (where
// the host takes them), permission bits with setuid, setgid and sticky,
// nanosecond mtimes, and owners when the SSH user is root; then `sync -f`
// (or sync) makes it durable. Without GNU tar it is uploaded file by file
// over SFTP (each fsynced where the server offers fsync@openssh.com),
// keeping hard links where the server offers hardlink@openssh.com, modes
// and whole-second mtimes; fifos are then refused. Holes are written as
// zeros either way.
//
// A socket or a device (or a fifo the host cannot take) is refused by
// name (KindUnsupported) before anything is written; an access refusal in
// src or on the host is KindPermission naming the path.
// providers.WriteStarted is called right before the staging directory is
// made; a failed write removes it.
func (p *Provider) WriteFiles(ctx context.Context, id providers.InstanceID, src string) (string, error) {
	const op = "write files"
	if err := checkID(op, id); err != nil {
		return "", err
	}
	sr, err := os.OpenRoot(src)
	if err != nil {
		return "", newErr(op, id, providers.KindInvalid, "source directory %s cannot be opened: %v", src, err)
	}
	defer sr.Close()
	c, err := p.dial(ctx, op, id)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := p.needInstance(c, op, id); err != nil {
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	hs, err := p.host(ctx, c, op, id)
	if err != nil {
		return "", err
	}
	keep := hs.support()
	srcName := "the source tree " + src
	err = fsmeta.ScanSource(ctx, sr.FS(), Name, srcName, func(t fs.FileMode) bool {
		return fsmeta.Uncreatable(t) || (!keep.Fifos && t&fs.ModeNamedPipe != 0)
	})
	var cc *fsmeta.CannotCreate
	if errors.As(err, &cc) {
		switch {
		case cc.Type&fs.ModeNamedPipe == 0:
		case hs.tar:
			cc.Why = "the filesystem under " + p.cfg.Root + " on " + p.cfg.Addr + " refused a fifo"
		default:
			cc.Why = p.cfg.Addr + " has no GNU tar, and SFTP cannot make fifos"
		}
		return "", wrap(op, id, cc)
	}
	if err != nil {
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	parent := path.Join(p.cfg.Root, stagingDir)
	staging := path.Join(parent, string(id)+".write."+randHex(8))
	providers.WriteStarted(ctx)
	err = c.sftp.MkdirAll(parent)
	if err == nil {
		err = c.sftp.Mkdir(staging)
	}
	if err != nil {
		if fsmeta.IsPermission(err) {
			err = &fsmeta.EntryError{Verb: "create", Rel: path.Base(staging), Where: parent + " on " + p.cfg.Addr, Dest: true, Err: err}
		}
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	dstName := "the staging directory " + staging + " on " + p.cfg.Addr
	if hs.tar {
		err = extract(ctx, c, sr, staging, hs, srcName, dstName)
	} else {
		err = upload(ctx, sr, c.sftp, staging, keep.HardLinks, srcName, dstName)
	}
	if err != nil {
		_ = removeRemote(c.sftp, staging)
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	return staging, nil
}

// extract streams src as a tar into GNU tar running in staging.
func extract(ctx context.Context, c *conn, src *os.Root, staging string, hs hostSupport, srcName, dstName string) error {
	flags := "-x -f - -p --numeric-owner"
	if hs.xattrs {
		flags += " --xattrs --xattrs-include='user.*'"
	}
	sync := "sync"
	if hs.syncF {
		sync = "sync -f ."
	}
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		err := tartree.Write(ctx, src, pw, tartree.WriteOptions{Xattrs: hs.xattrs, Where: srcName, Provider: Name})
		pw.CloseWithError(err) // a failure ends the stream early: tar sees no end of archive and fails
		sent <- err
	}()
	exit, stderr, err := c.run(ctx, "cd "+shQuote(staging)+" && tar "+flags+" && "+sync, pr, nil)
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the writer if tar stopped reading
	werr := <-sent
	var ee *fsmeta.EntryError
	var cc *fsmeta.CannotCreate
	switch {
	case errors.As(werr, &ee), errors.As(werr, &cc), ctx.Err() != nil:
		return ctxErr(ctx, werr)
	case err != nil:
		return fmt.Errorf("tar into %s: %w", dstName, err)
	case exit != 0:
		if rel := deniedPath(stderr); rel != "" {
			return &fsmeta.EntryError{Verb: "create", Rel: rel, Where: dstName, Dest: true, Err: deniedErrno(stderr)}
		}
		return fmt.Errorf("tar into %s failed (exit %d): %s", dstName, exit, firstLine(stderr))
	case werr != nil:
		return fmt.Errorf("sending the tree to %s: %w", dstName, werr)
	}
	return nil
}

// deniedErrno is the errno a GNU tool's refusal message stands for.
func deniedErrno(stderr string) error {
	if strings.Contains(stderr, "Operation not permitted") {
		return syscall.EPERM
	}
	return syscall.EACCES
}

// upload is WriteFiles without GNU tar on the host: SFTP, file by file.
func upload(ctx context.Context, src *os.Root, c *sftp.Client, dst string, hardLinks bool, srcName, dstName string) error {
	type dirMeta struct {
		rel  string
		info fs.FileInfo
	}
	var dirs []dirMeta
	links := map[inodeKey]string{}
	srcErr := func(rel string, err error) error {
		return &fsmeta.EntryError{Verb: "read", Rel: rel, Where: srcName, Err: err}
	}
	dstErr := func(verb, rel string, err error) error {
		return &fsmeta.EntryError{Verb: verb, Rel: rel, Where: dstName, Dest: true, Err: err}
	}
	err := fsmeta.WalkSource(ctx, src.FS(), srcName, func(rel string, info fs.FileInfo) error {
		remote := path.Join(dst, filepath.ToSlash(rel))
		m := info.Mode()
		if st, ok := info.Sys().(*syscall.Stat_t); ok && hardLinks && st.Nlink > 1 && m.IsRegular() {
			k := inodeKey{uint64(st.Dev), uint64(st.Ino)}
			if first, ok := links[k]; ok {
				if err := c.Link(path.Join(dst, first), remote); err != nil {
					return dstErr("link "+first+" to", rel, err)
				}
				return nil
			}
			links[k] = filepath.ToSlash(rel)
		}
		switch {
		case m.IsDir():
			if rel != "." {
				if err := c.Mkdir(remote); err != nil {
					return dstErr("create", rel, err)
				}
			}
			dirs = append(dirs, dirMeta{rel, info})
			return nil
		case m.IsRegular():
			return uploadFile(src, c, rel, remote, srcErr, dstErr)
		case m&fs.ModeSymlink != 0:
			target, err := src.Readlink(rel)
			if err != nil {
				return srcErr(rel, err)
			}
			if err := c.Symlink(target, remote); err != nil {
				return dstErr("create", rel, err)
			}
			return nil
		}
		return &fsmeta.CannotCreate{Provider: Name, Rel: rel, Type: m.Type(), Where: srcName, Written: true}
	})
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		remote := path.Join(dst, filepath.ToSlash(d.rel))
		if err := c.Chmod(remote, permBits(d.info.Mode())); err != nil {
			return dstErr("set the mode of", d.rel, err)
		}
		if err := c.Chtimes(remote, d.info.ModTime(), d.info.ModTime()); err != nil {
			return dstErr("set the times of", d.rel, err)
		}
	}
	return nil
}

func uploadFile(src *os.Root, c *sftp.Client, rel, remote string, srcErr func(string, error) error, dstErr func(string, string, error) error) error {
	in, err := src.Open(rel)
	if err != nil {
		return srcErr(rel, err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return srcErr(rel, err)
	}
	out, err := c.OpenFile(remote, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return dstErr("create", rel, err)
	}
	_, err = out.ReadFrom(tartree.TaggedReader{R: in})
	var re *tartree.ReadError
	if errors.As(err, &re) {
		out.Close()
		return srcErr(rel, re.Err)
	}
	if err == nil {
		err = out.Chmod(permBits(info.Mode()))
	}
	if err == nil {
		if serr := out.Sync(); serr != nil && !isUnsupported(serr) {
			err = serr
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = c.Chtimes(remote, info.ModTime(), info.ModTime())
	}
	if err != nil {
		return dstErr("write", rel, err)
	}
	return nil
}

func isUnsupported(err error) bool {
	var st *sftp.StatusError
	return errors.As(err, &st) && st.FxCode() == sftp.ErrSSHFxOpUnsupported
}

// removeRemote removes the tree dir on the host, also when it holds
// read-only directories a non-root user cannot empty: after a first
// attempt is refused it gives every directory in the tree (walked with
// lstat, never through a symlink) its owner's read, write and search
// bits, then tries again. An absent dir is not an error.
func removeRemote(c *sftp.Client, dir string) error {
	err := c.RemoveAll(dir)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if !fsmeta.IsPermission(err) {
		return err
	}
	w := c.Walk(dir)
	for w.Step() {
		if fi := w.Stat(); w.Err() == nil && fi.IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
			_ = c.Chmod(w.Path(), fi.Mode().Perm()|0o700)
		}
	}
	if err := c.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Switch implements providers.Provider with two renames on the host (SFTP
// posix-rename@openssh.com, i.e. rename(2)): the workspace to
// <root>/.lifeboat/switching/<id>, then staging into its place; if the
// second fails, the first is undone. SFTP has no atomic exchange, so
// between the two renames the instance name is absent; Inspect reports a
// parked tree there as KindConflict, never Missing. The old tree is
// removed once the new one is in place. providers.WriteStarted is called
// right before the first change.
func (p *Provider) Switch(ctx context.Context, id providers.InstanceID, staging string) error {
	const op = "switch"
	if err := checkID(op, id); err != nil {
		return err
	}
	base := path.Base(staging)
	if path.Clean(staging) != path.Join(p.cfg.Root, stagingDir, base) || !strings.HasPrefix(base, string(id)+".write.") {
		return newErr(op, id, providers.KindInvalid, "%s is not a staging directory WriteFiles made for this instance under %s", staging, path.Join(p.cfg.Root, stagingDir))
	}
	defer p.locks.Lock(id)()
	c, err := p.dial(ctx, op, id)
	if err != nil {
		return err
	}
	defer c.Close()
	if fi, err := c.sftp.Lstat(staging); err != nil || !fi.IsDir() {
		return newErr(op, id, providers.KindInvalid, "staging directory %s does not exist on %s (already switched, or not made by WriteFiles)", staging, p.cfg.Addr)
	}
	if err := p.needInstance(c, op, id); err != nil {
		return wrap(op, id, ctxErr(ctx, err))
	}
	inst := p.instDir(id)
	parked := path.Join(p.cfg.Root, switchingDir, string(id))
	providers.WriteStarted(ctx)
	err = c.sftp.MkdirAll(path.Dir(parked))
	if err == nil {
		err = removeRemote(c.sftp, parked) // a tree left by a switch that crashed after its second rename
	}
	if err == nil {
		err = c.sftp.PosixRename(inst, parked)
	}
	if err != nil {
		return wrap(op, id, ctxErr(ctx, err))
	}
	if err := c.sftp.PosixRename(staging, inst); err != nil {
		if uerr := c.sftp.PosixRename(parked, inst); uerr != nil {
			return wrap(op, id, fmt.Errorf("switch failed (%w) and undoing it failed too: the old tree is at %s on %s: %v", ctxErr(ctx, err), parked, p.cfg.Addr, uerr))
		}
		return wrap(op, id, ctxErr(ctx, err))
	}
	_ = removeRemote(c.sftp, parked) // the switch holds either way
	return nil
}
