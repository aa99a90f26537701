//go:build !linux

package ssh

import (
	"errors"
	"os"

	"lifeboat/providers/fsmeta"
)

// Outside Linux the mirror makes no fifos and sets no xattrs.

func mkfifoIn(*os.Root, string) error { return errors.ErrUnsupported }

func applyXattrs(*os.File, []fsmeta.Xattr, []fsmeta.Xattr) error { return nil }
