package ssh

import (
	"os"

	"golang.org/x/sys/unix"

	"lifeboat/providers/fsmeta"
)

// applyXattrs turns f's user.* attributes from have into want.
func applyXattrs(f *os.File, have, want []fsmeta.Xattr) error {
	keep := make(map[string]bool, len(want))
	for _, x := range want {
		keep[x.Name] = true
		if err := unix.Fsetxattr(int(f.Fd()), x.Name, x.Value, 0); err != nil {
			return &os.PathError{Op: "setxattr " + x.Name, Path: f.Name(), Err: err}
		}
	}
	for _, x := range have {
		if !keep[x.Name] {
			if err := unix.Fremovexattr(int(f.Fd()), x.Name); err != nil && err != unix.ENODATA {
				return &os.PathError{Op: "removexattr " + x.Name, Path: f.Name(), Err: err}
			}
		}
	}
	return nil
}
