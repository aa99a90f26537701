package ssh

import "io/fs"

type inodeKey struct{ dev, ino uint64 }

func permBits(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}
