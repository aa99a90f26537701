package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"lifeboat/backend"
)

var _ backend.TempSaver = (*Backend)(nil)

// Save stores data under h atomically and durably: temp file in tmp/,
// write, fsync, close, rename, fsync the directory. On error before the
// rename the temp file is removed and nothing is visible under h.
func (b *Backend) Save(ctx context.Context, h backend.Handle, data []byte) error {
	if err := check(ctx, "save", h); err != nil {
		return err
	}
	tmp, err := b.writeTemp(data)
	if err != nil {
		return b.fail("save", h, err)
	}
	return b.place(ctx, h, tmp)
}

// place renames the durable temp file tmp to h's path and fsyncs the
// directory; before the rename it removes tmp on error.
func (b *Backend) place(ctx context.Context, h backend.Handle, tmp string) error {
	if err := ctx.Err(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("local: save %s: %w", h, err)
	}
	if h.Type == backend.Config {
		if err := b.placeOnce(h, tmp); err != nil {
			return err
		}
	} else if err := b.rename(tmp, b.path(h)); err != nil {
		os.Remove(tmp)
		return b.fail("save", h, err)
	}
	if err := syncDir(filepath.Dir(b.path(h))); err != nil {
		// The file is visible but may not survive a crash. It is not
		// removed: it may replace an earlier, durable copy.
		return b.fail("save", h, err)
	}
	return nil
}

// placeOnce links tmp to the config's path, which link(2) refuses when a
// file is there: of two processes saving a config, one wins. When a config
// is there, the same bytes succeed and others fail with backend.ErrExists.
// tmp is removed in every case. A filesystem without hard links falls
// back to a check and a rename.
func (b *Backend) placeOnce(h backend.Handle, tmp string) error {
	defer os.Remove(tmp)
	dst := b.path(h)
	err := os.Link(tmp, dst)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		if _, serr := os.Lstat(dst); !errors.Is(serr, fs.ErrNotExist) {
			err = fs.ErrExist
		} else if err = os.Rename(tmp, dst); err != nil {
			return b.fail("save", h, err)
		} else {
			return nil
		}
	}
	stored, rerr := os.ReadFile(dst)
	mine, merr := os.ReadFile(tmp)
	if rerr != nil || merr != nil {
		return b.fail("save", h, errors.Join(rerr, merr))
	}
	if !bytes.Equal(stored, mine) {
		return fmt.Errorf("local: save %s: %w: another config is stored at %s (a repository exists)", h, backend.ErrExists, dst)
	}
	return nil
}

// writeTemp writes data to a new fsynced, closed temp file and returns its
// path. On error the temp file is gone.
func (b *Backend) writeTemp(data []byte) (name string, err error) {
	f, err := b.newTemp()
	if err != nil {
		return "", err
	}
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		b.DiscardTemp(f)
		return f.Name(), err
	}
	return f.Name(), b.finishTemp(f)
}

// newTemp creates a temp file in tmp/, creating the directory if needed.
func (b *Backend) newTemp() (file, error) {
	dir := filepath.Join(b.dir, tmpDir)
	f, err := b.createTemp(dir, tempPrefix+"*")
	if errors.Is(err, fs.ErrNotExist) {
		if err = b.ensureDir(dir); err == nil {
			f, err = b.createTemp(dir, tempPrefix+"*")
		}
	}
	return f, err
}

// finishTemp fsyncs and closes f; on error it removes it.
func (b *Backend) finishTemp(f backend.TempFile) error {
	if err := f.Sync(); err != nil {
		b.DiscardTemp(f)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// CreateTemp returns a new temp file in the repository's tmp/ directory,
// for SaveTemp.
func (b *Backend) CreateTemp() (backend.TempFile, error) {
	f, err := b.newTemp()
	if err != nil {
		return nil, b.tempErr(err)
	}
	return tempFile{f, b}, nil
}

// tempFile maps a full disk met while writing to backend.ErrNoSpace.
type tempFile struct {
	file
	b *Backend
}

func (t tempFile) Write(p []byte) (int, error) {
	n, err := t.file.Write(p)
	if err != nil {
		err = t.b.tempErr(err)
	}
	return n, err
}

func (b *Backend) tempErr(err error) error {
	if isNoSpace(err) {
		return fmt.Errorf("local: writing a temp file: %w: %w; free space on the disk holding %s, then retry", backend.ErrNoSpace, err, b.dir)
	}
	return fmt.Errorf("local: writing a temp file in %s: %w", filepath.Join(b.dir, tmpDir), err)
}

// SaveTemp stores a temp file from CreateTemp under h like Save: fsync,
// close, rename, fsync the directory.
func (b *Backend) SaveTemp(ctx context.Context, h backend.Handle, f backend.TempFile) error {
	if err := check(ctx, "save", h); err != nil {
		b.DiscardTemp(f)
		return err
	}
	if err := b.finishTemp(f); err != nil {
		return b.fail("save", h, err)
	}
	return b.place(ctx, h, f.Name())
}

// DiscardTemp closes and removes a temp file that will not be saved.
func (b *Backend) DiscardTemp(f backend.TempFile) {
	f.Close()
	os.Remove(f.Name())
}

// rename moves tmp to dst, creating dst's directory when missing.
func (b *Backend) rename(tmp, dst string) error {
	err := os.Rename(tmp, dst)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := b.ensureDir(filepath.Dir(dst)); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// ensureDir creates dir and missing parents below the repository root
// (never the root itself), fsyncing each parent that gained an entry.
func (b *Backend) ensureDir(dir string) error {
	if dir == b.dir || len(dir) <= len(b.dir) {
		return &os.PathError{Op: "mkdir", Path: dir, Err: fmt.Errorf("repository directory is missing (is the disk mounted?)")}
	}
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		if err := b.ensureDir(filepath.Dir(dir)); err != nil {
			return err
		}
		err = os.Mkdir(dir, 0o700)
	}
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// syncDir fsyncs a directory so renames and creations in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if err != nil && ignorableSyncErr(err) {
		err = nil
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
