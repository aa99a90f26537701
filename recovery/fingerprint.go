package recovery

import (
	"encoding/binary"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/zeebo/blake3"
)

// fingerprint is the cheap change detection behind periodic capture: a
// digest, keyed with the store's salt (so it reveals nothing about names),
// of every entry's path, type, mode, size, mtime, ctime and inode under
// dir, symlinks not followed. It costs one lstat per entry and reads no
// content. Equal fingerprints mean the capture would find every file
// unchanged, as the file cache judges it (same inode, size, mtime, ctime).
func fingerprint(salt []byte, dir string) ([]byte, error) {
	h, err := blake3.NewKeyed(salt)
	if err != nil {
		return nil, err
	}
	var buf []byte
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, path)
		buf = append(buf[:0], rel...)
		buf = append(buf, 0)
		if err != nil { // unreadable: recorded, so a change of it shows
			buf = append(buf, err.Error()...)
			buf = append(buf, 0)
			_, _ = h.Write(buf)
			if d != nil && d.IsDir() && path != dir {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			buf = append(buf, err.Error()...)
		} else {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(info.Mode()))
			buf = binary.LittleEndian.AppendUint64(buf, uint64(info.Size()))
			buf = binary.LittleEndian.AppendUint64(buf, uint64(info.ModTime().UnixNano()))
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(st.Ctim.Nano()))
				buf = binary.LittleEndian.AppendUint64(buf, st.Ino)
				buf = binary.LittleEndian.AppendUint64(buf, st.Dev)
			}
		}
		buf = append(buf, 0)
		_, _ = h.Write(buf)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
