package profile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	return len(ents) - 1 // the one ReadDir had open
}

// TestDiscoverDeep: a tree of 2,000 levels whose paths are far beyond
// PATH_MAX is searched to the bottom with a bounded number of open
// descriptors (the limit is lowered while it runs), and the siblings
// that come after the deep branch at levels 10 and 1,500 (whose
// descriptors were closed on the way down) are found too.
func TestDiscoverDeep(t *testing.T) {
	const levels = 2000
	ws := t.TempDir()
	level := strings.Repeat("L", 100) // 2,000 levels of it make a 202,000-byte path
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	var wantRel []string
	for i := 1; i <= levels; i++ {
		if i == 10 || i == 1500 {
			writeAt(t, fd, "zz", "prefs.js", "cookies.sqlite")
			wantRel = append([]string{strings.Repeat(level+"/", i-1) + "zz firefox"}, wantRel...)
		}
		must(t, unix.Mkdirat(fd, level, 0o755))
		next, err := unix.Openat(fd, level, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		must(t, unix.Close(fd))
		fd = next
	}
	writeAt(t, fd, "bottom", "profiles.ini")
	must(t, unix.Close(fd))
	want := append([]string{strings.Repeat(level+"/", levels) + "bottom firefox"}, wantRel...)

	before := openFDs(t)
	var lim syscall.Rlimit
	must(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	low := lim
	low.Cur = uint64(before + maxHeld + 16)
	must(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	got, err := Discover(ws)
	must(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	must(t, err)
	var have []string
	for _, p := range got {
		have = append(have, p.Rel+" "+string(p.Kind))
	}
	if !slices.Equal(have, want) {
		short := func(rels []string) string { // "L"*100 as "L"
			return strings.ReplaceAll(fmt.Sprint(rels), level, "L")
		}
		t.Fatalf("Discover found %s\nwant %s", short(have), short(want))
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors open before Discover, %d after", before, after)
	}
}

// writeAt makes directory dir in dirfd holding empty files names.
func writeAt(t *testing.T, dirfd int, dir string, names ...string) {
	t.Helper()
	must(t, unix.Mkdirat(dirfd, dir, 0o755))
	for _, n := range names {
		f, err := unix.Openat(dirfd, dir+"/"+n, unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL, 0o644)
		must(t, err)
		must(t, unix.Close(f))
	}
}

// TestReopenParent: a parent whose descriptor was closed is reopened
// through ".." of its child, unless the child was moved to another
// directory meanwhile.
func TestReopenParent(t *testing.T) {
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a/b": "/", "c": "/"})
	open := func(p string) int {
		fd, err := unix.Open(filepath.Join(ws, p), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		t.Cleanup(func() { _ = unix.Close(fd) })
		return fd
	}
	a := &searchDir{name: "a", fd: -1}
	a.id, _ = statDir(open("a"))
	b := &searchDir{parent: a, name: "b", fd: open("a/b")}
	fd := reopenParent(b)
	if id, ok := statDir(fd); fd < 0 || !ok || id != a.id {
		t.Fatalf("reopened a: fd %d, %v, want %v", fd, id, a.id)
	}
	must(t, unix.Close(fd))
	must(t, os.Rename(filepath.Join(ws, "a", "b"), filepath.Join(ws, "c", "b")))
	if fd := reopenParent(b); fd != -1 {
		t.Fatalf("reopened the parent of a moved directory: fd %d", fd)
	}
	if fd := reopenParent(&searchDir{parent: a, fd: -1}); fd != -1 {
		t.Fatalf("reopened the parent of a closed directory: fd %d", fd)
	}
}

// TestDiscoverLargeDirectory: the files of a directory cost no memory
// (only subdirectory names are kept): searching one of 20,000 files
// allocates less than 100 KiB in all, where keeping their names alone
// would take megabytes.
func TestDiscoverLargeDirectory(t *testing.T) {
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"big/sub/profiles.ini": ""})
	dir, err := unix.Open(filepath.Join(ws, "big"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	defer unix.Close(dir)
	for i := range 20_000 {
		fd, err := unix.Openat(dir, fmt.Sprintf("file-with-a-longish-name-%06d", i), unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL, 0o644)
		must(t, err)
		must(t, unix.Close(fd))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	checkDiscover(t, ws, "big/sub firefox")
	runtime.ReadMemStats(&after)
	n := after.TotalAlloc - before.TotalAlloc
	t.Logf("Discover allocated %d bytes", n)
	if n > 100<<10 {
		t.Fatalf("Discover allocated %d bytes for a directory of 20,000 files", n)
	}
}
