package capture

import (
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// capTestNamesDir makes a directory of names of many lengths, one the
// longest a name can be, and of odd bytes, and returns it open.
func capTestNamesDir(t *testing.T) (dir string, fd int) {
	t.Helper()
	dir = t.TempDir()
	names := []string{"a", "\xff\xfe", "with space", ".hidden", "..x", strings.Repeat("n", 255)}
	for i := range 300 {
		names = append(names, strings.Repeat("l", i%200+1)+string(rune('a'+i/200)))
	}
	for _, n := range names {
		if err := os.WriteFile(dir+"/"+n, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	return dir, fd
}

// TestCapParseNames checks that capParseNames gives the names, and stops,
// exactly as unix.ParseDirent does, on buffers getdents filled.
func TestCapParseNames(t *testing.T) {
	_, fd := capTestNamesDir(t)
	for _, size := range []int{4 << 10, 64 << 10} {
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, size)
		var bufs [][]byte
		for {
			n, err := unix.Getdents(fd, buf)
			if err != nil {
				t.Fatal(err)
			}
			if n <= 0 {
				break
			}
			bufs = append(bufs, slices.Clone(buf[:n]))
		}
		for _, most := range []int{-1, 0, 1, 7, 1000} {
			var got, want []string
			for _, b := range bufs {
				_, _, want = unix.ParseDirent(b, most, want)
				got = capParseNames(b, most, got)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("buffer %d, most %d: got %d names %q..., want %d", size, most, len(got), got[:min(len(got), 3)], len(want))
			}
		}
	}
}

// TestCapFstatat checks capFstatat against unix.Fstatat: a file, a
// symlink (not followed), a missing name, a name with a NUL.
func TestCapFstatat(t *testing.T) {
	dir, fd := capTestNamesDir(t)
	if err := os.Symlink("a", dir+"/link"); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for _, name := range []string{"a", "link", strings.Repeat("n", 255), "missing", "a\x00b"} {
		var got, want unix.Stat_t
		var err error
		buf, err = capFstatat(fd, name, &got, buf)
		wantErr := unix.Fstatat(fd, name, &want, unix.AT_SYMLINK_NOFOLLOW)
		if err != wantErr || got != want {
			t.Errorf("%q: got %v %+v, want %v %+v", name, err, got, wantErr, want)
		}
	}
}
