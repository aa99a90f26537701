package local

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// deniedError explains a permission error met while opening the
// repository at dir: which user this process runs as, which directory
// refuses it (its owner and mode, where they can be read), and what to
// do. err stays in the chain, so errors.Is(err, fs.ErrPermission) holds.
func deniedError(dir string, err error) error {
	return fmt.Errorf("local: open %s: %w: %s; run lifeboat as a user that may read the repository (its owner), or give this user read and search access to %s and everything in it",
		dir, err, describeDenied(dir), dir)
}

// describeDenied names this process's user and the directory that refuses
// it: the deepest of dir and its parents that can be stat'ed (stat needs
// search access to the parents only, so the refusal is that directory's).
func describeDenied(dir string) string {
	uid := os.Geteuid()
	who := "lifeboat runs as uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		who += " (" + u.Username + ")"
	}
	for p := dir; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			return who + ", and " + p + " is " + ownerOf(fi) + "mode " + fi.Mode().String()
		}
		if filepath.Dir(p) == p {
			return who
		}
	}
}
