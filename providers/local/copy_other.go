//go:build !linux

package local

import (
	"errors"
	"io"
	"os"
	"time"

	"lifeboat/providers/fsmeta"
)

// Outside Linux the copy is plain: no extent map, no extended attributes,
// and fifos and symlink times are refused or left as made.

type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

func copyData(out, in *os.File, size int64, buf []byte) error {
	_, err := io.CopyBuffer(out, io.LimitReader(in, size), buf)
	return err
}

func fdXattrs(*os.File) ([]fsmeta.Xattr, error)       { return nil, nil }
func setXattrs(*os.File, []fsmeta.Xattr) error        { return nil }
func mkfifoat(int, string, uint32) error              { return errors.ErrUnsupported }
func lutimes(int, string, time.Time, time.Time) error { return nil }

func probeXattr(*os.File) bool { return false }
func probeHole(*os.File) bool  { return false }
