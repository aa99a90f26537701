//go:build unix

package osutil

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// XattrsUnsupported reports whether err says the filesystem (or this kind
// of file) takes no extended attributes.
func XattrsUnsupported(err error) bool {
	return errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)
}

// ReadXattrs lists a file's extended attributes with list, reads each one
// keep accepts with get, and returns them as mk makes them, in listing
// order (a value is never nil, an empty one is []byte{}). Buffers grow
// when the attributes grow between the size query and the read (ERANGE);
// an attribute removed since it was listed is skipped; a file whose
// filesystem takes no attributes has none.
func ReadXattrs[T any](keep func(name string) bool, list func([]byte) (int, error), get func(string, []byte) (int, error), mk func(name string, value []byte) T) ([]T, error) {
	var names []byte
	for {
		n, err := list(nil)
		if err == nil && n > 0 {
			names = make([]byte, n)
			n, err = list(names)
		}
		if err == unix.ERANGE {
			continue
		}
		if XattrsUnsupported(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing extended attributes: %w", err)
		}
		names = names[:n]
		break
	}
	var out []T
	for name := range strings.SplitSeq(string(names), "\x00") {
		if name == "" || !keep(name) {
			continue
		}
		val, err := readXattr(name, get)
		if err != nil {
			return nil, err
		}
		if val != nil {
			out = append(out, mk(name, val))
		}
	}
	return out, nil
}

// readXattr reads one attribute: nil when it is gone.
func readXattr(name string, get func(string, []byte) (int, error)) ([]byte, error) {
	for {
		var val []byte
		n, err := get(name, nil)
		if err == nil && n > 0 {
			val = make([]byte, n)
			n, err = get(name, val)
		}
		switch {
		case err == unix.ERANGE:
			continue
		case err == unix.ENODATA:
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("reading extended attribute %q: %w", name, err)
		}
		if val == nil {
			return []byte{}, nil
		}
		return val[:n], nil
	}
}
