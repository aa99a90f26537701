package recovery

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/zeebo/blake3"
)

// fingerprintWalkDir is the fingerprint as filepath.WalkDir computes it,
// the definition fingerprint keeps (fingerprints stored by earlier
// versions must still match unchanged files).
func fingerprintWalkDir(t *testing.T, salt []byte, dir string) []byte {
	t.Helper()
	h, err := blake3.NewKeyed(salt)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, path)
		buf = append(buf[:0], rel...)
		buf = append(buf, 0)
		if err != nil {
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
		t.Fatal(err)
	}
	return h.Sum(nil)
}

// The fingerprint walks by descriptor but hashes what a filepath.WalkDir
// of the tree hashes: the same digest for every kind of entry, special
// modes, a symlink to a directory (not followed), a root given with a
// trailing slash or through "..", a root that is a file, a missing root
// and an unreadable directory; and a change of any entry changes it.
func TestFingerprintMatchesWalkDir(t *testing.T) {
	salt := []byte("0123456789abcdef0123456789abcdef")
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "alpha", "d/b.txt": "beta", "d/e/c.txt": "gamma", "z/deep/deeper/f": "f",
		"B": "upper case sorts first", "d/e.txt": "a file beside the directory e"})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// More entries than one run of stats holds, subdirectories between
	// them, and a deeper tree: the runs are hashed in the walk's order.
	many := map[string]string{}
	for i := range 300 {
		many[fmt.Sprintf("many/f%03d", i)] = "x"
		if i%70 == 0 {
			many[fmt.Sprintf("many/f%03d-dir/sub%d/leaf", i, i)] = "y"
		}
	}
	writeFiles(t, ws, many)
	must(os.Mkdir(filepath.Join(ws, "empty"), 0o700))
	must(os.Symlink("d", filepath.Join(ws, "link-to-dir")))
	must(os.Symlink("nowhere", filepath.Join(ws, "dangling")))
	must(syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600))
	must(syscall.Chmod(filepath.Join(ws, "a.txt"), 0o4755))
	must(syscall.Chmod(filepath.Join(ws, "d"), 0o2775))
	must(syscall.Chmod(filepath.Join(ws, "empty"), 0o1777))
	check := func(dir string) {
		t.Helper()
		got, err := fingerprint(salt, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := fingerprintWalkDir(t, salt, dir); !bytes.Equal(got, want) {
			t.Fatalf("fingerprint of %s: %x, WalkDir's %x", dir, got, want)
		}
	}
	for _, dir := range []string{ws, ws + "/", filepath.Join(root, "ws", "d") + "/../", filepath.Join(ws, "a.txt"),
		filepath.Join(ws, "link-to-dir"), filepath.Join(root, "missing")} {
		check(dir)
	}
	before, err := fingerprint(salt, ws, nil)
	must(err)
	must(os.WriteFile(filepath.Join(ws, "z", "deep", "deeper", "f"), []byte("g"), 0o644))
	if after, err := fingerprint(salt, ws, nil); err != nil || bytes.Equal(before, after) {
		t.Fatalf("a file rewritten deep down left the fingerprint as it was: %v", err)
	}
	// An unreadable directory (its listing fails unless the test runs
	// with CAP_DAC_OVERRIDE): its error is hashed the same way.
	must(os.Chmod(filepath.Join(ws, "d", "e"), 0))
	check(ws)
	must(os.Chmod(filepath.Join(ws, "d", "e"), 0o755))
}
