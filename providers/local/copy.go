package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

var (
	errEOF                 = io.EOF
	errNotEmpty            = syscall.ENOTEMPTY
	errExchangeUnsupported = errors.New("atomic exchange not supported by this filesystem")
)

// copyBetween copies the tree at srcRel to the existing empty directory
// dstRel, both under r.
func copyBetween(ctx context.Context, r *os.Root, srcRel, dstRel string, clone bool) error {
	src, err := r.OpenRoot(srcRel)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := r.OpenRoot(dstRel)
	if err != nil {
		return err
	}
	defer dst.Close()
	return copyTree(ctx, src, dst, clone)
}

type dirMeta struct {
	rel  string
	info fs.FileInfo
}

// copyTree copies every entry of src into the empty directory dst:
// directories, regular files (cloned with FICLONE when clone is set and the
// filesystem allows, else copied) and symlinks (as symlinks, never
// followed), with mode, times and, when running as root, ownership.
// Devices, fifos and sockets are refused by name. Hard links inside src
// become separate files. Both sides are os.Roots, so neither a symlink in
// src nor one created in dst can take a read or write outside them. It ends
// with one syncfs so the tree is durable before anyone switches it in.
func copyTree(ctx context.Context, src, dst *os.Root, clone bool) error {
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
		switch m := info.Mode(); {
		case m.IsDir():
			if rel != "." {
				if err := dst.Mkdir(rel, 0o700); err != nil {
					return err
				}
			}
			dirs = append(dirs, dirMeta{rel, info})
			return nil
		case m.IsRegular():
			return copyFile(src, dst, rel, info, clone)
		case m&fs.ModeSymlink != 0:
			target, err := src.Readlink(rel)
			if err != nil {
				return err
			}
			if err := dst.Symlink(target, rel); err != nil {
				return err
			}
			return chown(dst.Lchown, rel, info)
		default:
			return fmt.Errorf("%s is a %s; only directories, regular files and symlinks can be copied: remove it first", rel, m.Type())
		}
	})
	if err != nil {
		return err
	}
	// Directory metadata last, deepest first, so adding entries does not
	// move a directory's mtime after it was set.
	for _, d := range slices.Backward(dirs) {
		if err := dst.Chmod(d.rel, permBits(d.info.Mode())); err != nil {
			return err
		}
		if err := chown(dst.Lchown, d.rel, d.info); err != nil {
			return err
		}
		if err := dst.Chtimes(d.rel, atime(d.info), d.info.ModTime()); err != nil {
			return err
		}
	}
	f, err := dst.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return syncFS(f)
}

func copyFile(src, dst *os.Root, rel string, info fs.FileInfo, clone bool) error {
	in, err := src.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		if err == nil {
			err = fmt.Errorf("%s changed type while being copied", rel)
		}
		return err
	}
	out, err := dst.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if !clone || reflink(out, in) != nil {
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return fmt.Errorf("copy %s: %w", rel, err)
		}
	}
	if err := out.Chmod(permBits(info.Mode())); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := chown(dst.Lchown, rel, info); err != nil {
		return err
	}
	return dst.Chtimes(rel, atime(info), info.ModTime())
}

func permBits(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// chown keeps ownership when running as root; other users cannot give
// files away, and their copies belong to them.
func chown(lchown func(string, int, int) error, rel string, info fs.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return lchown(rel, int(st.Uid), int(st.Gid))
}

// syncDir fsyncs the directory rel under r, making renames in it durable.
func syncDir(r *os.Root, rel string) error {
	f, err := r.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
