package tartree

import (
	"archive/tar"
	"errors"
	"io/fs"
	"os"
	"time"

	"lifeboat/providers/fsmeta"
)

// NodeType is the type of a tar device entry (fs.ModeDevice, with
// fs.ModeCharDevice for a character device), or 0 for any other entry.
func NodeType(h *tar.Header) fs.FileMode {
	switch h.Typeflag {
	case tar.TypeChar:
		return fs.ModeDevice | fs.ModeCharDevice
	case tar.TypeBlock:
		return fs.ModeDevice
	}
	return 0
}

// MakeNode makes the socket or device node rel of type typ in a mirror
// (see MknodIn: a device gets device number 0), with the permission bits
// of mode and the mtime mtime, so capture records it (a capture records
// sockets and devices, never stores them). Where a device node cannot be
// made (Lifeboat does not run as root) the error is a *fsmeta.CannotCreate
// naming rel, which adapters report as unsupported: retrying does not
// help; the entry is to be removed from the workspace or excluded.
func MakeNode(dst *os.Root, rel string, typ, mode fs.FileMode, mtime time.Time, provider, where string) error {
	if err := MknodIn(dst, rel, typ); err != nil {
		if fsmeta.IsPermission(err) || errors.Is(err, errors.ErrUnsupported) {
			return &fsmeta.CannotCreate{Provider: provider, Rel: rel, Type: typ, Where: where, Written: true,
				Why: "its mirror holds a device node only when Lifeboat runs as root"}
		}
		return err
	}
	if err := dst.Chmod(rel, mode); err != nil {
		return err
	}
	return dst.Chtimes(rel, mtime, mtime)
}
