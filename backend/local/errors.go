package local

import (
	"errors"
	"fmt"
	"io/fs"

	"lifeboat/backend"
)

// fail wraps err from op on h, mapping OS errors to backend sentinels.
// The OS error (which names the path) stays in the chain.
func (b *Backend) fail(op string, h backend.Handle, err error) error {
	switch {
	case isNoSpace(err):
		return fmt.Errorf("local: %s %s: %w: %w; free space on the disk holding %s, then retry", op, h, backend.ErrNoSpace, err, b.dir)
	case op != "save" && errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("local: %s %s: %w: %w", op, h, backend.ErrNotFound, err)
	}
	return fmt.Errorf("local: %s %s: %w", op, h, err)
}

// mapNoSpace adds backend.ErrNoSpace to the chain of a disk-full error.
func mapNoSpace(err error) error {
	if isNoSpace(err) {
		return fmt.Errorf("%w: %w", backend.ErrNoSpace, err)
	}
	return err
}
