//go:build !linux

package providertest

import (
	"errors"
	"testing"
)

// Outside Linux the special-file helpers skip the test: the adapters'
// fidelity is specified and tested on Linux.

func DenyWrites(t testing.TB, dir string) bool { return false }

func MakeSocket(t testing.TB, path string) { t.Skip("special files are tested on Linux only") }

func MakeFifo(t testing.TB, path string, mode uint32) {
	t.Skip("special files are tested on Linux only")
}

func UserXattrs(t testing.TB, dir string) bool { return false }

func setXattr(path, name string, value []byte) error { return errors.ErrUnsupported }

func firstHole(path string) (int64, error) { return 0, errors.ErrUnsupported }
