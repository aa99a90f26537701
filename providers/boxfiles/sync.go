package boxfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"lifeboat/internal/osutil"
	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
	"lifeboat/providers/tartree"
)

// racyWindow: a file whose mtime is this close to the listing's time may
// change again within the same mtime tick, so it is transferred again
// (git's "racy" rule, with the sandbox's own clock).
const racyWindow = 2 * time.Second

// listScript writes, into the file $2, a header record with the sandbox's
// clock and one NUL-terminated record per entry of the workspace $1
// (type, size, mtime, mode, inode, links, path), in find's pre-order.
const listScript = `{ printf 'now %s\0' "$(date +%s)"; find "$1" -mindepth 1 -printf '%y %s %T@ %m %D:%i %n %P\0'; } > "$2" || exit 2`

// packScript archives the names listed (NUL-separated) in $1, without
// recursing, into $2, from the workspace as working directory.
const packScript = `tar --create --format=posix --numeric-owner --no-recursion --null --files-from "$1" --file "$2"; r=$?; rm -f "$1"; exit $r`

// remoteEntry is one record of listScript.
type remoteEntry struct {
	rel   string
	typ   byte
	size  int64
	mtime time.Time
	perm  fs.FileMode
	inode string
	nlink int
}

func parseListing(b []byte) (now time.Time, entries []remoteEntry, err error) {
	recs := bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0})
	if len(recs) == 0 || !bytes.HasPrefix(recs[0], []byte("now ")) {
		return now, nil, errors.New("the listing has no clock record")
	}
	sec, err := strconv.ParseInt(string(recs[0][4:]), 10, 64)
	if err != nil {
		return now, nil, fmt.Errorf("the listing's clock %q: %w", recs[0][4:], err)
	}
	now = time.Unix(sec, 0)
	for _, r := range recs[1:] {
		f := strings.SplitN(string(r), " ", 7)
		if len(f) != 7 || len(f[0]) != 1 {
			return now, nil, fmt.Errorf("unreadable listing record %q", r)
		}
		e := remoteEntry{typ: f[0][0], inode: f[4], rel: f[6]}
		if e.rel == "" || strings.ContainsRune(e.rel, 0) || !filepath.IsLocal(e.rel) {
			return now, nil, fmt.Errorf("the listing names %q, which is not a path inside the workspace", e.rel)
		}
		m, err1 := strconv.ParseUint(f[3], 8, 32)
		e.size, err = strconv.ParseInt(f[1], 10, 64)
		n, err2 := strconv.Atoi(f[5])
		mt, err3 := parseMtime(f[2])
		if err = errors.Join(err, err1, err2, err3); err != nil {
			return now, nil, fmt.Errorf("unreadable listing record %q: %w", r, err)
		}
		e.perm, e.nlink, e.mtime = osutil.FileMode(uint32(m)), n, mt
		entries = append(entries, e)
	}
	return now, entries, nil
}

// parseMtime reads find's %T@ ("1617512767.1234567890").
func parseMtime(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	frac = (frac + "000000000")[:9]
	ns, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(secs, ns), nil
}

// plan compares the listing with the mirror: the names to remove from the
// mirror first, and the names to transfer (every directory, for its
// metadata; every symlink and fifo; every regular file that differs in
// size, mtime or mode, is recent, or has other names). Devices and
// sockets are not mirrored.
func plan(now time.Time, entries []remoteEntry, local map[string]fs.FileInfo) (remove, send []string) {
	seen := make(map[string]bool, len(entries))
	send = []string{"."}
	for _, e := range entries {
		seen[e.rel] = true
		l := local[e.rel]
		switch e.typ {
		case 'd':
			if l != nil && !l.IsDir() {
				remove = append(remove, e.rel)
			}
			send = append(send, e.rel)
		case 'f':
			if l != nil && l.Mode().IsRegular() && l.Size() == e.size && l.ModTime().Equal(e.mtime) &&
				l.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) == e.perm && e.nlink == 1 && links(l) == 1 && e.mtime.Before(now.Add(-racyWindow)) {
				continue
			}
			if l != nil {
				remove = append(remove, e.rel)
			}
			send = append(send, e.rel)
		case 'l', 'p':
			if l != nil {
				remove = append(remove, e.rel)
			}
			send = append(send, e.rel)
		default:
			if l != nil {
				remove = append(remove, e.rel)
			}
		}
	}
	for rel := range local {
		if !seen[rel] {
			remove = append(remove, rel)
		}
	}
	sort.Strings(remove)
	return remove, send
}

func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// localListing describes the mirror dir (relative names; none when absent).
func localListing(dir string) (map[string]fs.FileInfo, error) {
	out := map[string]fs.FileInfo{}
	err := fsmeta.Walk(dir, func(_, rel string, fi fs.FileInfo) error {
		out[rel] = fi
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	return out, err
}

// openUp gives every directory of the mirror its owner's bits, so a
// non-root Lifeboat can change entries under read-only ones (the transfer
// sets every directory's mode again).
func openUp(dir string) {
	if os.Geteuid() == 0 {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o700 != 0o700 {
				_ = os.Chmod(p, fi.Mode().Perm()|0o700)
			}
		}
		return nil
	})
}

// sync brings the mirror dir of id up to date: list the workspace, plan,
// remove what went or changed, transfer the rest as one archive.
func (f *Files) sync(ctx context.Context, op string, id providers.InstanceID, dir string) error {
	l := f.Layout
	tmp := path.Join(l.Area(), "tmp")
	if err := f.run(ctx, op, id, l.Parent(), "mkdir", "mkdir", "-p", tmp); err != nil {
		return err
	}
	list := path.Join(tmp, TmpName("list"))
	if err := f.run(ctx, op, id, l.Parent(), "listing the workspace", "sh", "-c", listScript, "lifeboat", l.Base(), list); err != nil {
		return err
	}
	var lb bytes.Buffer
	lw := &boundedWriter{w: &lb, left: maxListing}
	err := f.Box.Download(ctx, id, path.Join(l.Parent(), list), lw)
	_, _ = f.Box.Run(context.WithoutCancel(ctx), id, l.Parent(), []string{"rm", "-f", list})
	if lw.over {
		return f.err(op, id, providers.KindConflict, "the workspace listing of %s is larger than %d bytes; refused (more entries than Lifeboat mirrors, or the listing file in the sandbox was replaced)", l.Workspace, maxListing)
	}
	if err != nil {
		return err
	}
	now, entries, err := parseListing(lb.Bytes())
	if err != nil {
		return f.err(op, id, providers.KindConflict, "the workspace listing of %s: %w", l.Workspace, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f.local(op, id, err)
	}
	local, err := localListing(dir)
	if err != nil {
		return f.local(op, id, err)
	}
	remove, send := plan(now, entries, local)

	// The names to send, uploaded; the archive made, downloaded.
	var names bytes.Buffer
	for _, n := range send {
		names.WriteString(n)
		names.WriteByte(0)
	}
	namesFile, archive := TmpName("names"), TmpName("read")+".tar"
	if err := f.Box.Upload(ctx, id, path.Join(l.Parent(), tmp, namesFile), bytes.NewReader(names.Bytes()), int64(names.Len())); err != nil {
		return err
	}
	res, err := f.Box.Run(ctx, id, l.Workspace, []string{"sh", "-c", packScript, "lifeboat", "../" + tmp + "/" + namesFile, "../" + tmp + "/" + archive})
	if err != nil {
		return err
	}
	defer func() {
		_, _ = f.Box.Run(context.WithoutCancel(ctx), id, l.Parent(), []string{"rm", "-f", path.Join(tmp, archive)})
	}()
	if res.ExitCode != 0 && !(res.ExitCode <= 2 && onlyVanished(res.Stderr)) {
		return f.failed(op, id, l.Workspace, "tar --create", res)
	}
	af, err := os.CreateTemp(f.CacheDir, ".download-*")
	if err != nil {
		return f.local(op, id, err)
	}
	defer os.Remove(af.Name())
	defer af.Close()
	aw := &boundedWriter{w: af, left: archiveBound(entries, send)}
	err = f.Box.Download(ctx, id, path.Join(l.Parent(), tmp, archive), aw)
	if aw.over {
		return f.err(op, id, providers.KindConflict, "the archive of the workspace %s is larger than %d bytes, more than its listing allows; refused (the workspace grew while it was read, or the archive in the sandbox was replaced; the next read tries again)", l.Workspace, aw.limit())
	}
	if err != nil {
		return err
	}
	if _, err := af.Seek(0, 0); err != nil {
		return f.local(op, id, err)
	}

	// The mirror: what went or changed removed, then the archive applied.
	openUp(dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return f.local(op, id, err)
	}
	defer root.Close()
	for _, rel := range remove {
		if err := fsmeta.RemoveTree(root, filepath.FromSlash(rel)); err != nil {
			return f.local(op, id, fmt.Errorf("the local mirror %s: removing %s: %w", dir, rel, err))
		}
	}
	err = tartree.Extract(ctx, af, root, tartree.ExtractOptions{Where: "the local mirror of instance " + string(id), Owners: os.Geteuid() == 0, Provider: f.Provider})
	if err != nil {
		return f.local(op, id, err)
	}
	return nil
}

// maxListing bounds the workspace listing ReadFiles downloads (about 2.5
// million entries).
var maxListing int64 = 256 << 20

// archiveBound is the most bytes the archive of send may hold: the listed
// sizes of its regular files, a generous allowance per entry for its tar
// headers (long names and link targets included), and a quarter plus
// 64 MiB for files that grew between the listing and the archive.
func archiveBound(entries []remoteEntry, send []string) int64 {
	sizes := make(map[string]int64, len(entries))
	for _, e := range entries {
		if e.typ == 'f' {
			sizes[e.rel] = e.size
		}
	}
	var n int64
	for _, rel := range send {
		n += (sizes[rel]+511)/512*512 + 16<<10
	}
	return n + n/4 + 64<<20
}

// boundedWriter passes at most left bytes on to w; past that, writes fail
// and over is set.
type boundedWriter struct {
	w     io.Writer
	left  int64
	total int64
	over  bool
}

var errTooLarge = errors.New("larger than allowed")

func (b *boundedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > b.left {
		b.over = true
		return 0, errTooLarge
	}
	n, err := b.w.Write(p)
	b.left -= int64(n)
	b.total += int64(n)
	return n, err
}

// limit is the bound b was made with.
func (b *boundedWriter) limit() int64 { return b.left + b.total }

// onlyVanished reports whether tar's complaints are all about names that
// went between the listing and the archive (they are then simply not in
// the mirror).
func onlyVanished(stderr []byte) bool {
	for _, line := range strings.Split(strings.TrimSpace(string(stderr)), "\n") {
		if line != "" && !strings.Contains(line, "No such file or directory") && !strings.Contains(line, "Exiting with failure status") &&
			!strings.Contains(line, "file changed as we read it") {
			return false
		}
	}
	return true
}
