package osutil

import "io/fs"

// UnixMode is m's permission bits with setuid, setgid and sticky in their
// Unix places (as chmod and a tar header take them).
func UnixMode(m fs.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// FileMode is the inverse of UnixMode: a Unix mode's permission bits with
// setuid, setgid and sticky as fs.FileMode's (the file type bits are
// dropped).
func FileMode(v uint32) fs.FileMode {
	m := fs.FileMode(v) & fs.ModePerm
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
