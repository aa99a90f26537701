package tartree

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"lifeboat/internal/osutil"
	"lifeboat/providers/fsmeta"
)

// WriteOptions says how Write describes the tree.
type WriteOptions struct {
	Xattrs   bool   // send user.* xattrs as SCHILY.xattr records
	Where    string // the tree, for messages ("the source tree /x")
	Provider string // the adapter, for CannotCreate
	// Prefix, when set, is put before every name ("a/b" makes the root
	// entry "a/b/" and a file "a/b/f"); hard links name their target with
	// it.
	Prefix string
}

type inodeKey struct{ dev, ino uint64 }

// ReadError marks a failure reading the source, as opposed to sending
// (see TaggedReader).
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// TaggedReader wraps every read error of R (io.EOF aside) in a
// *ReadError, so a copy loop can tell a source failure from a sink one.
type TaggedReader struct{ R io.Reader }

func (t TaggedReader) Read(p []byte) (int, error) {
	n, err := t.R.Read(p)
	if err != nil && err != io.EOF {
		err = &ReadError{err}
	}
	return n, err
}

// Write writes the tree src to w as a PAX tar stream: "./" first (the
// tree's own mode and times), then every entry in lexical order with its
// permission bits (setuid, setgid, sticky too), nanosecond mtime and
// numeric owner; a later name of an inode already sent is a hard link
// (TypeLink) to the first; fifos are TypeFifo, symlinks TypeSymlink; with
// o.Xattrs, the user.* attributes of files and directories ride as
// SCHILY.xattr records. Sparse files are sent whole (archive/tar writes no
// sparse map). A socket or a device is a *fsmeta.CannotCreate (callers
// scan for them first). Source failures are *fsmeta.EntryError naming the
// entry; a failure to send is returned as it came.
func Write(ctx context.Context, src *os.Root, w io.Writer, o WriteOptions) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	links := map[inodeKey]string{}
	srcErr := func(rel string, err error) error {
		return &fsmeta.EntryError{Verb: "read", Rel: rel, Where: o.Where, Err: err}
	}
	name := func(rel string) string {
		if o.Prefix == "" {
			return rel
		}
		return path.Join(o.Prefix, rel)
	}
	err := fsmeta.WalkSource(ctx, src.FS(), o.Where, func(rel string, info fs.FileInfo) error {
		m := info.Mode()
		h := &tar.Header{Name: name(rel), Mode: int64(osutil.UnixMode(m)), ModTime: info.ModTime(), Format: tar.FormatPAX}
		st, _ := info.Sys().(*syscall.Stat_t)
		if st != nil {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		}
		if st != nil && st.Nlink > 1 && !m.IsDir() && m&fs.ModeSymlink == 0 {
			k := inodeKey{uint64(st.Dev), uint64(st.Ino)}
			if first, ok := links[k]; ok {
				// The mode stays: an extractor that applies it to the
				// link (the Docker daemon's does) sets the shared
				// inode's own.
				h.Typeflag, h.Linkname = tar.TypeLink, name(first)
				return tw.WriteHeader(h)
			}
			links[k] = rel
		}
		switch {
		case m.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name(rel)+"/"
			if rel == "." && o.Prefix == "" {
				h.Name = "./"
			}
			if o.Xattrs {
				if err := addXattrs(src, rel, h); err != nil {
					return srcErr(rel, err)
				}
			}
			return tw.WriteHeader(h)
		case m.IsRegular():
			return tarFile(src, tw, rel, h, o.Xattrs, srcErr)
		case m&fs.ModeSymlink != 0:
			target, err := src.Readlink(rel)
			if err != nil {
				return srcErr(rel, err)
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(h)
		case m&fs.ModeNamedPipe != 0:
			h.Typeflag = tar.TypeFifo
			return tw.WriteHeader(h)
		}
		return &fsmeta.CannotCreate{Provider: o.Provider, Rel: rel, Type: m.Type(), Where: o.Where, Written: true}
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	return err
}

func tarFile(src *os.Root, tw *tar.Writer, rel string, h *tar.Header, xattrs bool, srcErr func(string, error) error) error {
	f, err := src.Open(rel)
	if err != nil {
		return srcErr(rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("changed type while being copied")
	}
	if err == nil && xattrs {
		err = addXattrsFd(f, h)
	}
	if err != nil {
		return srcErr(rel, err)
	}
	h.Typeflag, h.Size, h.ModTime, h.Mode = tar.TypeReg, fi.Size(), fi.ModTime(), int64(osutil.UnixMode(fi.Mode()))
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.CopyN(tw, TaggedReader{f}, fi.Size())
	var re *ReadError
	switch {
	case errors.Is(err, io.EOF):
		return srcErr(rel, errors.New("shrank while being copied"))
	case errors.As(err, &re):
		return srcErr(rel, re.Err)
	}
	return err
}

func addXattrs(src *os.Root, rel string, h *tar.Header) error {
	f, err := src.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	return addXattrsFd(f, h)
}

func addXattrsFd(f *os.File, h *tar.Header) error {
	xs, err := fsmeta.FdXattrs(int(f.Fd()), fsmeta.User)
	if err != nil || len(xs) == 0 {
		return err
	}
	h.PAXRecords = make(map[string]string, len(xs))
	for _, x := range xs {
		h.PAXRecords["SCHILY.xattr."+x.Name] = string(x.Value)
	}
	return nil
}
