package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"lifeboat/backend"
)

// tmpDir holds temp files of Saves; it is not a file type and List never
// sees it.
const tmpDir = "tmp"

// Backend is a repository in a local directory. Safe for concurrent use.
type Backend struct {
	dir        string
	createTemp func(dir, pattern string) (file, error) // fault hook for tests
}

var _ backend.Backend = (*Backend)(nil)

// Create makes the directory tree of a new repository at dir (creating dir
// itself if needed) and opens it. It refuses a directory that already
// holds a config file.
func Create(dir string) (*Backend, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local: create %s: %w", dir, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "config")); err == nil {
		return nil, fmt.Errorf("local: create %s: %w: a repository already exists there (config file present)", dir, backend.ErrExists)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local: create %s: %w", dir, mapNoSpace(err))
	}
	for _, sub := range subdirs() {
		p := filepath.Join(dir, sub)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("local: create %s: %w", dir, mapNoSpace(err))
		}
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("local: create %s: %w", dir, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("local: create %s: %w", dir, err)
	}
	return newBackend(dir), nil
}

// Open opens the existing repository at dir. It writes nothing; a missing
// type directory (some copy tools drop empty ones) is recreated by the
// first Save that needs it. When dir, or a directory above it, denies this
// user access, the error wraps fs.ErrPermission and names the user, the
// refusing directory's owner and mode, and what to do.
func Open(dir string) (*Backend, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrPermission) {
		return nil, deniedError(dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w (is the disk mounted?)", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local: open %s: not a directory", dir)
	}
	_, errCfg := os.Lstat(filepath.Join(dir, "config"))
	_, errKeys := os.Lstat(filepath.Join(dir, string(backend.Key)))
	for _, err := range []error{errCfg, errKeys} {
		if errors.Is(err, fs.ErrPermission) { // not "no repository": it may well be there
			return nil, deniedError(dir, err)
		}
	}
	if errCfg != nil && errKeys != nil {
		return nil, fmt.Errorf("local: open %s: no repository there (neither config nor keys/ found); check the path or create a repository first", dir)
	}
	return newBackend(dir), nil
}

func newBackend(dir string) *Backend {
	return &Backend{dir: dir, createTemp: osCreateTemp}
}

func subdirs() []string {
	var s []string
	for _, t := range backend.FileTypes {
		if t != backend.Config {
			s = append(s, string(t))
		}
	}
	return append(s, tmpDir)
}

// Location returns the repository directory.
func (b *Backend) Location() string { return b.dir }

// Close releases nothing; it exists to satisfy backend.Backend.
func (b *Backend) Close() error { return nil }

// path maps a valid handle to its file. Callers check h.Valid first.
func (b *Backend) path(h backend.Handle) string {
	switch h.Type {
	case backend.Config:
		return filepath.Join(b.dir, "config")
	case backend.Pack:
		return filepath.Join(b.dir, string(h.Type), h.Name[:2], h.Name)
	default:
		return filepath.Join(b.dir, string(h.Type), h.Name)
	}
}

// check validates h and ctx, the entry test of every handle method.
func check(ctx context.Context, op string, h backend.Handle) error {
	if err := h.Valid(); err != nil {
		return fmt.Errorf("local: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: %s %s: %w", op, h, err)
	}
	return nil
}
