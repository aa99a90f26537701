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
	"syscall"
	"time"

	"github.com/pkg/sftp"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
	mirrorpkg "lifeboat/providers/mirror"
	"lifeboat/providers/tartree"
)

// racyWindow: a file changed twice within one mtime tick with the same
// size looks unchanged. Without GNU find the tick is SFTP's (protocol v3)
// whole second; with it, find's nanosecond mtimes still come from the
// kernel's coarse clock (a tick of milliseconds). A file whose mtime is
// this close to the start of a sync is copied again every time (git's
// "racy" rule); this assumes the host's clock is within the window of
// ours.
const racyWindow = 2 * time.Second

// ReadFiles implements providers.Provider: the instance tree is mirrored
// into CacheDir/<id>, transferring only what changed since the last call
// (size, mtime, mode or owner differ, or the file is recent, see
// racyWindow), deleting what vanished. The mirror keeps:
//
//   - directories, regular files, symlinks as symlinks (remote symlinks
//     are never followed), fifos (mkfifo in the mirror);
//   - permission bits with setuid, setgid and sticky, and owners when
//     Lifeboat runs as root;
//   - mtimes of files, directories, symlinks and fifos: to the nanosecond
//     where the host has GNU find (one `find . -printf` per call lists
//     every entry, see findFormat; an entry whose whole second, type or
//     size differs from SFTP's listing changed in between, and gets
//     SFTP's), in whole seconds without it (all SFTP v3 carries);
//     symlink mtimes only on Linux (lutimes);
//   - hard links, where the host has GNU find: the same listing says
//     which files share an inode, and the mirror makes them one file;
//   - user.* xattrs of files and directories, where the host has getfattr
//     (Debian's attr) and the mirror's filesystem takes them: one
//     `getfattr -R -d` per call.
//
// Without GNU find every name is a separate file and mtimes are whole
// seconds; without getfattr no xattr is mirrored (FileSupport says so for
// links and xattrs; it has no field for mtimes). Devices and sockets are
// mirrored as nodes (tartree.MakeNode), so capture records them; a device
// needs root, else ReadFiles is KindUnsupported naming it. An access refusal on the host is KindPermission naming
// the path. The mirror stays locked against other ReadFiles of the same
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
	hs, err := p.host(ctx, c, op, id)
	if err != nil {
		return nil, err
	}
	unlock := p.locks.Lock(id)
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
	where := "instance " + string(id) + " on " + p.cfg.Addr
	rm, err := readRemoteMeta(ctx, c, p.instDir(id), where, hs, hs.localX)
	if err == nil {
		m := &mirror{ctx: ctx, c: c.sftp, local: root, base: p.instDir(id), racy: p.now().Add(-racyWindow), where: where,
			meta: rm, chown: os.Geteuid() == 0, reps: map[string]*linkRep{}, dirs: map[string]time.Time{}}
		err = m.syncDir(".")
		if err == nil {
			err = m.fixLinks()
		}
	}
	if err != nil {
		unlock()
		return nil, wrap(op, id, ctxErr(ctx, err))
	}
	return mirrorpkg.NewFiles(dir, unlock), nil
}

type mirror struct {
	ctx   context.Context
	c     *sftp.Client
	local *os.Root
	base  string
	racy  time.Time
	where string
	meta  remoteMeta
	chown bool // running as root: owners are mirrored

	reps     map[string]*linkRep  // inode key -> the name mirrored first this call
	deferred []linkTodo           // other names of those inodes
	dirs     map[string]time.Time // remote mtime of every directory, to restore after fixLinks
}

type linkRep struct {
	rel string
	rfi fs.FileInfo
}

type linkTodo struct {
	rel, key string
	rfi      fs.FileInfo
}

// validEntry refuses names a well-behaved server never sends.
func validEntry(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

func (m *mirror) remoteErr(rel string, err error) error {
	if fsmeta.IsPermission(err) {
		return &fsmeta.EntryError{Verb: "read", Rel: rel, Where: m.where, Err: err}
	}
	return fmt.Errorf("%s in %s: %w", filepath.ToSlash(rel), m.where, err)
}

func (m *mirror) syncDir(rel string) error {
	remote := path.Join(m.base, filepath.ToSlash(rel))
	entries, err := m.c.ReadDir(remote)
	if err != nil {
		return m.remoteErr(rel, fmt.Errorf("list: %w", err))
	}
	// The mirror of a read-only directory is read-only too; a non-root
	// user opens it up while syncing into it (its mode is set again below).
	if lfi, err := m.local.Lstat(rel); err == nil && !m.chown && lfi.Mode().Perm()&0o700 != 0o700 {
		if err := m.local.Chmod(rel, permBits(lfi.Mode())|0o700); err != nil {
			return err
		}
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
		return m.remoteErr(rel, err)
	}
	mt := m.mtime(rel, fi)
	m.dirs[rel] = mt
	if err := m.owner(rel, fi); err != nil {
		return err
	}
	if err := m.setXattrs(rel, true); err != nil {
		return err
	}
	if err := m.local.Chmod(rel, permBits(fi.Mode())); err != nil {
		return err
	}
	return m.local.Chtimes(rel, mt, mt)
}

// mtime is rel's remote mtime: find's, to the nanosecond, when find
// listed rel as SFTP lists it now (same type, same whole second (SFTP v3
// keeps its low 32 bits), same size for a file); else SFTP's whole
// second, as rel changed after find ran (a later sync corrects it).
func (m *mirror) mtime(rel string, rfi fs.FileInfo) time.Time {
	st := rfi.ModTime()
	e, ok := m.meta.entries[filepath.ToSlash(rel)]
	if !ok || uint32(e.mtime.Unix()) != uint32(st.Unix()) || e.typ != findType(rfi.Mode()) ||
		(rfi.Mode().IsRegular() && e.size != rfi.Size()) {
		return st
	}
	return e.mtime
}

// findType is find's %y letter for a mode's type.
func findType(m fs.FileMode) byte {
	switch {
	case m.IsRegular():
		return 'f'
	case m.IsDir():
		return 'd'
	case m&fs.ModeSymlink != 0:
		return 'l'
	case m&fs.ModeNamedPipe != 0:
		return 'p'
	case m&fs.ModeSocket != 0:
		return 's'
	case m&fs.ModeCharDevice != 0:
		return 'c'
	case m&fs.ModeDevice != 0:
		return 'b'
	}
	return '?'
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
		key, member := m.meta.groups[filepath.ToSlash(rel)]
		if member {
			if _, ok := m.reps[key]; ok {
				m.deferred = append(m.deferred, linkTodo{rel: rel, key: key, rfi: rfi})
				if lfi != nil && lfi.IsDir() {
					return fsmeta.RemoveTree(m.local, rel)
				}
				return nil
			}
			m.reps[key] = &linkRep{rel: rel, rfi: rfi}
		}
		if lfi != nil && lfi.Mode().IsRegular() && lfi.Size() == rfi.Size() && permBits(lfi.Mode()) == permBits(mode) &&
			lfi.ModTime().Equal(m.mtime(rel, rfi)) && m.mtime(rel, rfi).Before(m.racy) && m.sameOwner(lfi, rfi) &&
			(member || nlink(lfi) == 1) { // a name linked in the mirror but no longer on the host is copied apart
			return m.setXattrs(rel, false)
		}
		return m.download(rel, remote, rfi, lfi)
	case mode&fs.ModeSymlink != 0:
		target, err := m.c.ReadLink(remote)
		if err != nil {
			return m.remoteErr(rel, err)
		}
		mt := m.mtime(rel, rfi)
		if lfi != nil && lfi.Mode()&fs.ModeSymlink != 0 {
			if cur, err := m.local.Readlink(rel); err == nil && cur == target {
				if err := m.owner(rel, rfi); err != nil || lfi.ModTime().Equal(mt) {
					return err
				}
				return tartree.LutimesIn(m.local, rel, mt)
			}
		}
		if lfi != nil {
			if err := fsmeta.RemoveTree(m.local, rel); err != nil {
				return err
			}
		}
		if err := m.local.Symlink(target, rel); err != nil {
			return err
		}
		if err := m.owner(rel, rfi); err != nil {
			return err
		}
		return tartree.LutimesIn(m.local, rel, mt)
	case mode&fs.ModeNamedPipe != 0:
		if lfi != nil && lfi.Mode()&fs.ModeNamedPipe == 0 {
			if err := fsmeta.RemoveTree(m.local, rel); err != nil {
				return err
			}
			lfi = nil
		}
		if lfi == nil {
			if err := tartree.MkfifoIn(m.local, rel); err != nil {
				return err
			}
		}
		if err := m.owner(rel, rfi); err != nil {
			return err
		}
		if err := m.local.Chmod(rel, permBits(mode)); err != nil {
			return err
		}
		mt := m.mtime(rel, rfi)
		return m.local.Chtimes(rel, mt, mt)
	default: // device, socket: a node (tartree.MakeNode) capture records and never stores
		typ, mt := mode.Type(), m.mtime(rel, rfi)
		if lfi != nil && lfi.Mode().Type() == typ && permBits(lfi.Mode()) == permBits(mode) && lfi.ModTime().Equal(mt) && m.sameOwner(lfi, rfi) {
			return nil
		}
		if lfi != nil {
			if err := fsmeta.RemoveTree(m.local, rel); err != nil {
				return err
			}
		}
		if err := tartree.MakeNode(m.local, rel, typ, permBits(mode), mt, Name, "the local mirror of "+m.where); err != nil {
			return err
		}
		if err := m.owner(rel, rfi); err != nil {
			return err
		}
		return m.local.Chmod(rel, permBits(mode)) // a chown clears setuid and setgid
	}
}

// download copies one remote file into a temporary name beside rel and
// renames it over rel, so the mirror never holds a half-written file.
func (m *mirror) download(rel, remote string, rfi, lfi fs.FileInfo) error {
	rf, err := m.c.Open(remote)
	if err != nil {
		return m.remoteErr(rel, fmt.Errorf("open: %w", err))
	}
	defer rf.Close()
	tmp := filepath.Join(filepath.Dir(rel), ".lifeboat-tmp-"+randHex(8))
	f, err := m.local.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = rf.WriteTo(f)
	if err != nil && fsmeta.IsPermission(err) {
		err = m.remoteErr(rel, err)
	}
	if err == nil && m.chown {
		if uid, gid, ok := remoteOwner(rfi); ok {
			err = f.Chown(uid, gid)
		}
	}
	if err == nil {
		err = m.setXattrsFd(f, rel)
	}
	if err == nil {
		err = f.Chmod(permBits(rfi.Mode()))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		mt := m.mtime(rel, rfi)
		err = m.local.Chtimes(tmp, mt, mt)
	}
	if err == nil && lfi != nil && lfi.IsDir() {
		err = fsmeta.RemoveTree(m.local, rel)
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

// fixLinks makes each deferred name a hard link of the first name of its
// inode, when the host still shows them alike (size, mtime to the
// nanosecond where find gave it, mode, owner);
// otherwise (the tree changed between find and the listing) it is
// downloaded on its own. Directories whose entries changed get their
// times back.
func (m *mirror) fixLinks() error {
	touched := map[string]bool{}
	for _, d := range m.deferred {
		rep := m.reps[d.key]
		remote := path.Join(m.base, filepath.ToSlash(d.rel))
		if !sameRemote(rep.rfi, d.rfi) || !m.mtime(rep.rel, rep.rfi).Equal(m.mtime(d.rel, d.rfi)) {
			lfi, _ := m.local.Lstat(d.rel)
			if err := m.download(d.rel, remote, d.rfi, lfi); err != nil {
				return err
			}
			touched[filepath.Dir(d.rel)] = true
			continue
		}
		lrep, err := m.local.Lstat(rep.rel)
		if err != nil {
			return err
		}
		if lfi, err := m.local.Lstat(d.rel); err == nil && os.SameFile(lrep, lfi) {
			continue
		}
		tmp := filepath.Join(filepath.Dir(d.rel), ".lifeboat-tmp-"+randHex(8))
		if err := m.local.Link(rep.rel, tmp); err != nil {
			return err
		}
		if err := m.local.Rename(tmp, d.rel); err != nil {
			_ = m.local.Remove(tmp)
			return err
		}
		touched[filepath.Dir(d.rel)] = true
	}
	for dir := range touched {
		if mt, ok := m.dirs[dir]; ok {
			if err := m.local.Chtimes(dir, mt, mt); err != nil {
				return err
			}
		}
	}
	return nil
}

func sameRemote(a, b fs.FileInfo) bool {
	au, ag, _ := remoteOwner(a)
	bu, bg, _ := remoteOwner(b)
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode() && au == bu && ag == bg
}

// owner gives rel the remote owner when running as root.
func (m *mirror) owner(rel string, rfi fs.FileInfo) error {
	if !m.chown {
		return nil
	}
	uid, gid, ok := remoteOwner(rfi)
	if !ok {
		return nil
	}
	if lfi, err := m.local.Lstat(rel); err == nil {
		if st, ok := lfi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
	}
	return m.local.Lchown(rel, uid, gid)
}

func (m *mirror) sameOwner(lfi, rfi fs.FileInfo) bool {
	if !m.chown {
		return true
	}
	uid, gid, ok := remoteOwner(rfi)
	st, isStat := lfi.Sys().(*syscall.Stat_t)
	return !ok || (isStat && int(st.Uid) == uid && int(st.Gid) == gid)
}

func remoteOwner(rfi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := rfi.Sys().(*sftp.FileStat)
	if !ok {
		return 0, 0, false
	}
	return int(st.UID), int(st.GID), true
}

func nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// setXattrs makes rel's user.* attributes the host's, when xattrs are
// mirrored. Setting a user.* attribute needs write permission, and
// reading one read permission, even for the owner: a mode that lacks them
// is widened for the change and put back.
func (m *mirror) setXattrs(rel string, dir bool) error {
	if m.meta.xattrs == nil {
		return nil
	}
	need := fs.FileMode(0o600)
	if dir {
		need = 0o700
	}
	lfi, err := m.local.Lstat(rel)
	if err != nil {
		return err
	}
	if !m.chown && lfi.Mode().Perm()&need != need {
		if err := m.local.Chmod(rel, permBits(lfi.Mode())|need); err != nil {
			return err
		}
		defer m.local.Chmod(rel, permBits(lfi.Mode()))
	}
	f, err := m.local.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	return m.setXattrsFd(f, rel)
}

func (m *mirror) setXattrsFd(f *os.File, rel string) error {
	if m.meta.xattrs == nil {
		return nil
	}
	want := m.meta.xattrs[filepath.ToSlash(rel)]
	have, err := fsmeta.FdXattrs(int(f.Fd()), fsmeta.User)
	if err != nil {
		return err
	}
	if slices.EqualFunc(have, want, func(a, b fsmeta.Xattr) bool { return a.Name == b.Name && string(a.Value) == string(b.Value) }) {
		return nil
	}
	return applyXattrs(f, have, want)
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
			if err := fsmeta.RemoveTree(m.local, filepath.Join(rel, n)); err != nil {
				return err
			}
		}
	}
	return nil
}
