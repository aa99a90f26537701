package docker

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mkfifoIn makes a fifo at rel under r, through its parent directory
// opened in r, so no component can lead outside it.
func mkfifoIn(r *os.Root, rel string) error {
	d, err := r.Open(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Mkfifoat(int(d.Fd()), filepath.Base(rel), 0o600)
}
