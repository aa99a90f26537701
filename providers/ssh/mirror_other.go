//go:build !linux

package ssh

import (
	"os"
	"time"

	"lifeboat/providers/fsmeta"
)

// Outside Linux the mirror makes no fifos, sets no xattrs and leaves
// symlink times as they are.

func applyXattrs(*os.File, []fsmeta.Xattr, []fsmeta.Xattr) error { return nil }

func lutimesIn(*os.Root, string, time.Time) error { return nil }
