package ssh

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"lifeboat/providers"
)

// racyWindow: SFTP (protocol v3) carries mtimes in whole seconds, so a file
// changed twice within one second with the same size looks unchanged. A
// file whose mtime is this close to the start of a sync is copied again
// every time (git's "racy" rule); this assumes the host's clock is within
// the window of ours.
const racyWindow = 2 * time.Second

// mirrorFiles is the local mirror handed to capture; Close releases the
// instance's lock so the next ReadFiles can update it.
type mirrorFiles struct {
	dir    string
	unlock func()
}

func (m *mirrorFiles) Dir() string { return m.dir }
func (m *mirrorFiles) Close() error {
	if m.unlock != nil {
		m.unlock()
		m.unlock = nil
	}
	return nil
}

// ReadFiles implements providers.Provider: the instance tree is mirrored
// into CacheDir/<id>, transferring only what changed since the last call
// (size, whole-second mtime and mode differ, or the file is recent, see
// racyWindow), deleting what vanished, and keeping symlinks as symlinks.
// Remote symlinks are never followed; devices, fifos and sockets are not
// mirrored. The mirror stays locked against other ReadFiles of the same
// instance until Files.Close.
func (p *Provider) ReadFiles(ctx context.Context, id providers.InstanceID) (providers.Files, error) {
	const op = "read files"
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	c, err := p.dial(ctx, op, id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := p.needInstance(c, op, id); err != nil {
		return nil, wrap(op, id, ctxErr(ctx, err))
	}
	unlock := p.lock(id)
	dir := p.mirrorDir(id)
	err = os.MkdirAll(dir, 0o700)
	var root *os.Root
	if err == nil {
		root, err = os.OpenRoot(dir)
	}
	if err != nil {
		unlock()
		return nil, newErr(op, id, providers.KindUnavailable, "local mirror %s: %w", dir, err)
	}
	defer root.Close()
	m := &mirror{ctx: ctx, c: c.sftp, local: root, base: p.instDir(id), racy: p.now().Add(-racyWindow)}
	if err := m.syncDir("."); err != nil {
		unlock()
		return nil, wrap(op, id, ctxErr(ctx, err))
	}
	return &mirrorFiles{dir: dir, unlock: unlock}, nil
}

type mirror struct {
	ctx   context.Context
	c     *sftp.Client
	local *os.Root
	base  string
	racy  time.Time
}

// validEntry refuses names a well-behaved server never sends.
func validEntry(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

func (m *mirror) syncDir(rel string) error {
	remote := path.Join(m.base, filepath.ToSlash(rel))
	entries, err := m.c.ReadDir(remote)
	if err != nil {
		return fmt.Errorf("list %s: %w", remote, err)
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if err := m.ctx.Err(); err != nil {
			return err
		}
		if !validEntry(e.Name()) {
			return fmt.Errorf("host listed an invalid name %q in %s", e.Name(), remote)
		}
		seen[e.Name()] = true
		if err := m.syncEntry(filepath.Join(rel, e.Name()), e); err != nil {
			return err
		}
	}
	if err := m.prune(rel, seen); err != nil {
		return err
	}
	fi, err := m.c.Lstat(remote)
	if err != nil {
		return err
	}
	if err := m.local.Chmod(rel, fi.Mode().Perm()); err != nil {
		return err
	}
	return m.local.Chtimes(rel, fi.ModTime(), fi.ModTime())
}

func (m *mirror) syncEntry(rel string, rfi fs.FileInfo) error {
	lfi, err := m.local.Lstat(rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	remote := path.Join(m.base, filepath.ToSlash(rel))
	switch mode := rfi.Mode(); {
	case mode.IsDir():
		if lfi != nil && !lfi.IsDir() {
			if err := m.local.Remove(rel); err != nil {
				return err
			}
			lfi = nil
		}
		if lfi == nil {
			if err := m.local.Mkdir(rel, 0o700); err != nil {
				return err
			}
		}
		return m.syncDir(rel)
	case mode.IsRegular():
		if lfi != nil && lfi.Mode().IsRegular() && lfi.Size() == rfi.Size() && lfi.Mode().Perm() == mode.Perm() &&
			lfi.ModTime().Unix() == rfi.ModTime().Unix() && rfi.ModTime().Before(m.racy) {
			return nil
		}
		return m.download(rel, remote, rfi, lfi)
	case mode&fs.ModeSymlink != 0:
		target, err := m.c.ReadLink(remote)
		if err != nil {
			return err
		}
		if lfi != nil && lfi.Mode()&fs.ModeSymlink != 0 {
			if cur, err := m.local.Readlink(rel); err == nil && cur == target {
				return nil
			}
		}
		if lfi != nil {
			if err := m.local.RemoveAll(rel); err != nil {
				return err
			}
		}
		return m.local.Symlink(target, rel)
	default: // device, fifo, socket: not mirrored
		if lfi != nil {
			return m.local.RemoveAll(rel)
		}
		return nil
	}
}

// download copies one remote file into a temporary name beside rel and
// renames it over rel, so the mirror never holds a half-written file.
func (m *mirror) download(rel, remote string, rfi, lfi fs.FileInfo) error {
	rf, err := m.c.Open(remote)
	if err != nil {
		return fmt.Errorf("open %s: %w", remote, err)
	}
	defer rf.Close()
	tmp := filepath.Join(filepath.Dir(rel), ".lifeboat-tmp-"+randHex(8))
	f, err := m.local.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = rf.WriteTo(f)
	if err == nil {
		err = f.Chmod(rfi.Mode().Perm())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = m.local.Chtimes(tmp, rfi.ModTime(), rfi.ModTime())
	}
	if err == nil && lfi != nil && lfi.IsDir() {
		err = m.local.RemoveAll(rel)
	}
	if err == nil {
		err = m.local.Rename(tmp, rel)
	}
	if err != nil {
		_ = m.local.Remove(tmp)
		return fmt.Errorf("download %s: %w", remote, err)
	}
	return nil
}

// prune deletes local entries of rel that the host no longer has.
func (m *mirror) prune(rel string, seen map[string]bool) error {
	d, err := m.local.Open(rel)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if !seen[n] {
			if err := m.local.RemoveAll(filepath.Join(rel, n)); err != nil {
				return err
			}
		}
	}
	return nil
}
