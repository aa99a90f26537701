//go:build !linux

package local

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// Outside Linux there is no renameat2: NOREPLACE is a check followed by a
// rename (racy against a concurrent creator of the same name, which the
// per-instance lock covers within one process), exchange always falls back
// to the two-step switch, reflinks are not tried and syncFS fsyncs the
// directory only.

func renameNoReplace(r *os.Root, oldRel, newRel string) error {
	if _, err := r.Lstat(newRel); err == nil {
		return &os.LinkError{Op: "rename", Old: oldRel, New: newRel, Err: os.ErrExist}
	}
	return r.Rename(oldRel, newRel)
}

var exchange = func(r *os.Root, aRel, bRel string) error { return errExchangeUnsupported }

func reflink(dst, src *os.File) error { return errors.ErrUnsupported }

func syncFS(f *os.File) error { return f.Sync() }

func atime(info fs.FileInfo) time.Time { return info.ModTime() }
