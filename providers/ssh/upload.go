package ssh

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pkg/sftp"

	"lifeboat/providers"
)

// WriteFiles implements providers.Provider: src (read through an os.Root,
// its symlinks copied as links) is uploaded into a new directory
// <root>/.lifeboat/staging/<id>.write.<random> on the host, the same
// filesystem as the instance, whose remote path is returned. Each file is
// fsynced on the host when the server offers fsync@openssh.com. Devices,
// fifos and sockets are refused by name; a failed upload removes the
// staging directory.
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
	parent := path.Join(p.cfg.Root, stagingDir)
	staging := path.Join(parent, string(id)+".write."+randHex(8))
	err = c.sftp.MkdirAll(parent)
	if err == nil {
		err = c.sftp.Mkdir(staging)
	}
	if err == nil {
		err = upload(ctx, sr, c.sftp, staging)
		if err != nil {
			_ = c.sftp.RemoveAll(staging)
		}
	}
	if err != nil {
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	return staging, nil
}

func upload(ctx context.Context, src *os.Root, c *sftp.Client, dst string) error {
	type dirMeta struct {
		remote string
		info   fs.FileInfo
	}
	var dirs []dirMeta
	err := fs.WalkDir(src.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		remote := path.Join(dst, filepath.ToSlash(rel))
		switch m := info.Mode(); {
		case m.IsDir():
			if rel != "." {
				if err := c.Mkdir(remote); err != nil {
					return fmt.Errorf("mkdir %s: %w", remote, err)
				}
			}
			dirs = append(dirs, dirMeta{remote, info})
			return nil
		case m.IsRegular():
			return uploadFile(src, c, rel, remote, info)
		case m&fs.ModeSymlink != 0:
			target, err := src.Readlink(rel)
			if err != nil {
				return err
			}
			return c.Symlink(target, remote)
		default:
			return fmt.Errorf("%s is a %s; only directories, regular files and symlinks can be uploaded: remove it first", rel, m.Type())
		}
	})
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		if err := c.Chmod(d.remote, d.info.Mode().Perm()); err != nil {
			return err
		}
		if err := c.Chtimes(d.remote, d.info.ModTime(), d.info.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

func uploadFile(src *os.Root, c *sftp.Client, rel, remote string, info fs.FileInfo) error {
	in, err := src.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := c.OpenFile(remote, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("create %s: %w", remote, err)
	}
	_, err = out.ReadFrom(in)
	if err == nil {
		err = out.Chmod(info.Mode().Perm())
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
		return fmt.Errorf("upload %s: %w", remote, err)
	}
	return nil
}

func isUnsupported(err error) bool {
	var st *sftp.StatusError
	return errors.As(err, &st) && st.FxCode() == sftp.ErrSSHFxOpUnsupported
}

// Switch implements providers.Provider with two renames on the host (SFTP
// posix-rename@openssh.com, i.e. rename(2)): the workspace to
// <root>/.lifeboat/switching/<id>, then staging into its place; if the
// second fails, the first is undone. SFTP has no atomic exchange, so
// between the two renames the instance name is absent; Inspect reports a
// parked tree there as KindConflict, never Missing. The old tree is
// removed once the new one is in place.
func (p *Provider) Switch(ctx context.Context, id providers.InstanceID, staging string) error {
	const op = "switch"
	if err := checkID(op, id); err != nil {
		return err
	}
	base := path.Base(staging)
	if path.Clean(staging) != path.Join(p.cfg.Root, stagingDir, base) || !strings.HasPrefix(base, string(id)+".write.") {
		return newErr(op, id, providers.KindInvalid, "%s is not a staging directory WriteFiles made for this instance under %s", staging, path.Join(p.cfg.Root, stagingDir))
	}
	defer p.lock(id)()
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
	err = c.sftp.MkdirAll(path.Dir(parked))
	if err == nil {
		err = c.sftp.RemoveAll(parked) // a tree left by a switch that crashed after its second rename
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
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
	_ = c.sftp.RemoveAll(parked) // the switch holds either way
	return nil
}
