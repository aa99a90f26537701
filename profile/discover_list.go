package profile

import (
	"bytes"
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// Discovery lists each directory once with getdents and keeps only what
// it needs from the listing: the names of the subdirectories and which
// profile marker names are there. Other names are dropped as they are
// read, so a directory of a million files costs one buffer. The type of
// an entry comes from the listing (d_type); only an entry of unknown type
// is stat'ed, and a marker name is stat'ed to confirm it is a regular file.

// markerNames are the files that make a directory a profile root (see
// detect); a marker's bit in listing.markers is 1 << its index here.
var markerNames = [...]string{"Local State", "profiles.ini", "prefs.js", "cookies.sqlite", "key4.db"}

const (
	localState = iota
	profilesIni
	prefsJS
	cookiesSQLite
	key4DB
)

// listing is what discovery keeps of one directory's entries.
type listing struct {
	subdirs []string
	markers uint8 // bit i: markerNames[i] is listed as a regular file
	// complete is false when the directory could not be read to its end
	// (or at all): then every marker is looked up by name.
	complete bool
}

// linux_dirent64 as getdents returns it.
var (
	direntIno    = unsafe.Offsetof(unix.Dirent{}.Ino)
	direntReclen = unsafe.Offsetof(unix.Dirent{}.Reclen)
	direntType   = unsafe.Offsetof(unix.Dirent{}.Type)
	direntName   = unsafe.Offsetof(unix.Dirent{}.Name)
)

// list reads the directory open as fd with buf as getdents' buffer. On an
// error it returns what it read before it, incomplete.
func list(fd int, buf []byte) (listing, error) {
	var l listing
	for {
		var n int
		if err := osutil.IgnoringEINTR(func() (err error) { n, err = unix.Getdents(fd, buf); return err }); err != nil {
			return l, err
		}
		if n <= 0 {
			l.complete = true
			return l, nil
		}
		for b := buf[:n]; len(b) > int(direntName); {
			reclen := int(binary.NativeEndian.Uint16(b[direntReclen:]))
			if reclen <= int(direntName) || reclen > len(b) {
				break // not a record the kernel writes
			}
			ino := binary.NativeEndian.Uint64(b[direntIno:])
			name := b[direntName:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if ino != 0 && string(name) != "." && string(name) != ".." {
				l.add(fd, name, b[direntType])
			}
			b = b[reclen:]
		}
	}
}

// add takes entry name of the directory open as fd, of d_type typ, into l.
// An entry of unknown type (some filesystems do not tell) is stat'ed.
func (l *listing) add(fd int, name []byte, typ uint8) {
	if typ == unix.DT_UNKNOWN {
		typ = typeAt(fd, string(name))
	}
	switch typ {
	case unix.DT_DIR:
		l.subdirs = append(l.subdirs, string(name))
	case unix.DT_REG:
		for i, m := range markerNames {
			if string(name) == m {
				l.markers |= 1 << i
			}
		}
	}
}

// typeAt returns the d_type of entry name in dirfd from fstatat, without
// following a symlink; DT_UNKNOWN if it cannot be stat'ed (gone).
func typeAt(dirfd int, name string) uint8 {
	var st unix.Stat_t
	if osutil.IgnoringEINTR(func() error { return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }) != nil {
		return unix.DT_UNKNOWN
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	}
	return unix.DT_UNKNOWN // anything else is neither a marker nor searched
}

// regularAt reports whether name in dirfd is a regular file (not through
// a symlink at its last component).
func regularAt(dirfd int, name string) bool {
	return typeAt(dirfd, name) == unix.DT_REG
}

// detect tells whether the directory open as fd, listed as l, is a profile
// root and of which kind:
//   - Chromium: a regular Local State file and a subdirectory holding a
//     regular Preferences file (a directory with Local State and no such
//     subdirectory is no profile, whatever else it holds);
//   - Firefox: a regular profiles.ini, or a regular prefs.js with a regular
//     cookies.sqlite or key4.db.
//
// A marker named in the listing is stat'ed once more, so it is a regular
// file now and reachable, as the capture will need it.
func detect(fd int, l *listing) (Kind, bool) {
	has := func(m int) bool {
		return (!l.complete || l.markers&(1<<m) != 0) && regularAt(fd, markerNames[m])
	}
	if has(localState) {
		if !l.complete {
			return "", false // its profile folders are unknown
		}
		for _, sub := range l.subdirs {
			if regularAt(fd, sub+"/Preferences") {
				return Chromium, true
			}
		}
		return "", false
	}
	if has(profilesIni) || has(prefsJS) && (has(cookiesSQLite) || has(key4DB)) {
		return Firefox, true
	}
	return "", false
}

// DetectNames is detect for a directory another walk has listed: names
// are all its entries (complete), dirfd the directory open. A marker is
// matched by name and then stat'ed as detect does; every name counts as a
// possible profile folder, so a directory with a regular Local State costs
// a stat per entry to find the folder with Preferences (and one more for
// that folder, which must be a directory, not a symlink to one, as list
// keeps only directories). It only looks (fstatat on dirfd) and is safe
// for concurrent use.
func DetectNames(dirfd int, names []string) (Kind, bool) {
	l := listing{complete: true}
	for _, name := range names {
		for i, m := range markerNames {
			if name == m {
				l.markers |= 1 << i
			}
		}
	}
	if l.markers == 0 {
		return "", false // nothing to stat
	}
	if l.markers&(1<<localState) != 0 && !regularAt(dirfd, markerNames[localState]) {
		l.markers &^= 1 << localState // no marker: detect need not stat it again
	}
	if l.markers&(1<<localState) == 0 {
		return detect(dirfd, &l) // the Firefox markers
	}
	for _, name := range names {
		// Preferences first: it fails fast for the many entries that are
		// files; the folder itself must not be a symlink, which fstatat
		// follows in "name/Preferences".
		if regularAt(dirfd, name+"/Preferences") && typeAt(dirfd, name) == unix.DT_DIR {
			return Chromium, true
		}
	}
	return "", false
}
