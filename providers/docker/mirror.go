package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"lifeboat/internal/osutil"
	"lifeboat/providers/fsmeta"
	"lifeboat/providers/tartree"
)

// racyWindow: the daemon's tar carries whole-second mtimes, so a file
// changed again within the second it was copied, keeping its size, looks
// unchanged. An entry whose mtime is this close to the start of the sync
// that copied it is "racy" (git's rule) and copied again at the next sync,
// whatever its header says. The daemon shares this machine's clock (a unix
// socket); over tcp every sync copies everything.
const racyWindow = 2 * time.Second

// syncState is kept beside a mirror (CacheDir/.<id>.sync) once a sync has
// completed; it is removed when a sync starts, so a mirror a failed or
// killed sync left behind is never trusted.
type syncState struct {
	Racy []string `json:"racy"` // entries to copy again whatever their header says
}

func syncStateName(id string) string { return "." + id + ".sync" }

// takeState reads and removes the sync state of a mirror; ok is false
// when there is none (the mirror is then rebuilt whole).
func takeState(cache *os.Root, id string) (map[string]bool, bool) {
	b, err := cache.ReadFile(syncStateName(id))
	_ = cache.Remove(syncStateName(id))
	var st syncState
	if err != nil || json.Unmarshal(b, &st) != nil {
		return nil, false
	}
	racy := make(map[string]bool, len(st.Racy))
	for _, r := range st.Racy {
		racy[r] = true
	}
	return racy, true
}

func putState(cache *os.Root, id string, racy []string) error {
	sort.Strings(racy)
	b, err := json.Marshal(syncState{Racy: racy})
	if err != nil {
		return err
	}
	tmp := syncStateName(id) + ".tmp"
	if err := cache.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return cache.Rename(tmp, syncStateName(id))
}

// isRacy: an entry with this mtime copied by a sync that started at start
// may hide a later change of the same second.
func isRacy(mtime, start time.Time) bool { return !mtime.Add(racyWindow).Before(start) }

// racyEntries lists the files, symlinks and fifos of a freshly extracted
// mirror whose mtimes are racy for a sync that started at start.
func racyEntries(root *os.Root, start time.Time) ([]string, error) {
	var out []string
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil && isRacy(fi.ModTime(), start) {
			out = append(out, rel)
		}
		return err
	})
	return out, err
}

// syncer brings an existing mirror up to date from the daemon's tar
// stream in place (a device as tartree.MakeNode makes it): an entry whose type, size, mtime, mode and (as root)
// owner match, that is not racy and (for a file) has one link, is left as
// it is, inode and ctime included, so capture's file cache skips it;
// anything else is written anew (a file through a temporary name and a
// rename); entries the stream does not name are removed.
type syncer struct {
	dst   *os.Root
	chown bool
	racy  map[string]bool // from the previous sync
	start time.Time
	where string

	seen    map[string]bool
	dirs    tartree.Dirs
	newRacy []string
}

func (s *syncer) run(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	s.seen = map[string]bool{".": true}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the archive for %s: %w", s.where, err)
		}
		rel, ok := tartree.LocalName(h.Name)
		if !ok {
			return &fsmeta.EntryError{Verb: "create", Rel: h.Name, Where: s.where, Dest: true, Err: errors.New("the name leaves the tree (absolute or ..); refused")}
		}
		s.seen[rel] = true
		if h.Typeflag != tar.TypeDir && isRacy(h.ModTime, s.start) {
			s.newRacy = append(s.newRacy, filepath.ToSlash(rel))
		}
		if err := s.entry(tr, h, rel); err != nil {
			var cc *fsmeta.CannotCreate
			if errors.As(err, &cc) {
				return err
			}
			return &fsmeta.EntryError{Verb: "create", Rel: rel, Where: s.where, Dest: true, Err: err}
		}
	}
	if err := s.prune(); err != nil {
		return err
	}
	_, err := s.dirs.Apply(s.dst, s.chown)
	return err
}

func (s *syncer) entry(tr *tar.Reader, h *tar.Header, rel string) error {
	mode := osutil.FileMode(uint32(h.Mode))
	cur, err := s.dst.Lstat(rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err != nil {
		cur = nil
	}
	same := cur != nil && !s.racy[filepath.ToSlash(rel)] && (!s.chown || sameOwner(cur, h))
	switch h.Typeflag {
	case tar.TypeDir:
		if cur != nil && !cur.IsDir() {
			if err := fsmeta.RemoveTree(s.dst, rel); err != nil {
				return err
			}
			cur = nil
		}
		if cur == nil && rel != "." {
			if err := s.dst.Mkdir(rel, 0o700); err != nil {
				return err
			}
		} else if err := s.dst.Chmod(rel, 0o700); err != nil { // fillable until its own mode is set at the end
			return err
		}
		s.dirs.Add(rel, h)
		return nil
	case tar.TypeReg, tar.TypeRegA:
		if same && cur.Mode().IsRegular() && cur.Size() == h.Size && cur.ModTime().Equal(h.ModTime) &&
			cur.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) == mode && links(cur) == 1 {
			return nil // unchanged: the body is skipped by the next Next
		}
		return s.replace(rel, cur, func(tmp string) error {
			f, err := s.dst.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if err == nil && s.chown {
				err = f.Chown(h.Uid, h.Gid)
			}
			if err == nil {
				err = f.Chmod(mode)
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = s.dst.Chtimes(tmp, h.ModTime, h.ModTime)
			}
			return err
		})
	case tar.TypeLink:
		target, ok := tartree.LocalName(h.Linkname)
		if !ok || target == "." {
			return fmt.Errorf("hard link to %q leaves the tree; refused", h.Linkname)
		}
		if tfi, err := s.dst.Lstat(target); err == nil && cur != nil && os.SameFile(cur, tfi) {
			return nil
		}
		return s.replace(rel, cur, func(tmp string) error { return s.dst.Link(target, tmp) })
	case tar.TypeSymlink:
		if same && cur.Mode()&fs.ModeSymlink != 0 {
			if t, err := s.dst.Readlink(rel); err == nil && t == h.Linkname {
				if cur.ModTime().Equal(h.ModTime) {
					return nil
				}
				return tartree.LutimesIn(s.dst, rel, h.ModTime)
			}
		}
		return s.replace(rel, cur, func(tmp string) error {
			if err := s.dst.Symlink(h.Linkname, tmp); err != nil {
				return err
			}
			if s.chown {
				if err := s.dst.Lchown(tmp, h.Uid, h.Gid); err != nil {
					return err
				}
			}
			return tartree.LutimesIn(s.dst, tmp, h.ModTime)
		})
	case tar.TypeFifo:
		if same && cur.Mode()&fs.ModeNamedPipe != 0 && cur.Mode().Perm() == mode.Perm() && cur.ModTime().Equal(h.ModTime) {
			return nil
		}
		return s.replace(rel, cur, func(tmp string) error {
			if err := tartree.MkfifoIn(s.dst, tmp); err != nil {
				return err
			}
			if s.chown {
				if err := s.dst.Lchown(tmp, h.Uid, h.Gid); err != nil {
					return err
				}
			}
			if err := s.dst.Chmod(tmp, mode); err != nil {
				return err
			}
			return s.dst.Chtimes(tmp, h.ModTime, h.ModTime)
		})
	case tar.TypeChar, tar.TypeBlock:
		typ := tartree.NodeType(h)
		if same && cur.Mode().Type() == typ && cur.Mode().Perm() == mode.Perm() && cur.ModTime().Equal(h.ModTime) {
			return nil
		}
		return s.replace(rel, cur, func(tmp string) error {
			if err := tartree.MakeNode(s.dst, tmp, typ, mode, h.ModTime, Name, s.where); err != nil {
				var cc *fsmeta.CannotCreate
				if errors.As(err, &cc) {
					cc.Rel = rel
				}
				return err
			}
			if s.chown {
				if err := s.dst.Lchown(tmp, h.Uid, h.Gid); err != nil {
					return err
				}
				return s.dst.Chmod(tmp, mode)
			}
			return nil
		})
	case tar.TypeXHeader, tar.TypeXGlobalHeader, tar.TypeGNULongName, tar.TypeGNULongLink:
		return nil
	}
	return fmt.Errorf("entry type %q (a device or other special file) is never created; refused", string(h.Typeflag))
}

// replace makes rel anew: build makes it under a temporary name beside
// it, which is then renamed over whatever rel was (a directory there is
// removed first).
func (s *syncer) replace(rel string, cur fs.FileInfo, build func(tmp string) error) error {
	tmp := filepath.Join(filepath.Dir(rel), ".lifeboat-tmp-"+randHex(8))
	if err := build(tmp); err != nil {
		_ = s.dst.Remove(tmp)
		return err
	}
	if cur != nil && cur.IsDir() {
		if err := fsmeta.RemoveTree(s.dst, rel); err != nil {
			return err
		}
	}
	return s.dst.Rename(tmp, rel)
}

// prune removes what the stream did not name.
func (s *syncer) prune() error {
	var gone []string
	err := fs.WalkDir(s.dst.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !s.seen[filepath.FromSlash(rel)] {
			gone = append(gone, rel)
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	for _, rel := range gone {
		if err == nil {
			err = fsmeta.RemoveTree(s.dst, filepath.FromSlash(rel))
		}
	}
	return err
}

func sameOwner(fi fs.FileInfo, h *tar.Header) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == h.Uid && int(st.Gid) == h.Gid
}

func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}
