package docker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/providers/providertest"
)

// TestSymlinkTimes: a symlink keeps its own mtime both ways: written into
// a container (WriteFiles, Switch) and read back into the mirror, the
// first time (a whole extraction) and again (an in-place sync), so an
// unchanged container's mirror does not change between two reads.
func TestSymlinkTimes(t *testing.T) {
	p, id := newContainer(t, "symlink-times")
	ctx := context.Background()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(src, "l")); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	ts := unix.NsecToTimespec(old.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(src, "l"), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	providertest.PutTree(t, p, id, src)
	inContainer := func(name string) time.Time {
		t.Helper()
		res, err := p.Exec(ctx, id, []string{"stat", "-c", "%Y", name}, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("stat %s: %v %s", name, err, res.Stderr)
		}
		sec, err := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Unix(sec, 0)
	}
	if got := inContainer("l"); !got.Equal(old) {
		t.Fatalf("the symlink written into the container has mtime %v, want %v", got, old)
	}
	shell(t, p, id, "ln -s f new")
	mirrored := func() (l, n unix.Stat_t) {
		t.Helper()
		f, err := p.ReadFiles(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Lstat(filepath.Join(f.Dir(), "l"), &l); err != nil {
			t.Fatal(err)
		}
		if err := unix.Lstat(filepath.Join(f.Dir(), "new"), &n); err != nil {
			t.Fatal(err)
		}
		return l, n
	}
	for _, read := range []string{"first read (extraction)", "second read (sync)", "third read (sync)"} {
		l, n := mirrored()
		for _, c := range []struct {
			name string
			st   unix.Stat_t
		}{{"l", l}, {"new", n}} {
			if got, want := time.Unix(c.st.Mtim.Unix()), inContainer(c.name); !got.Equal(want) {
				t.Errorf("%s: symlink %s has mtime %v in the mirror, %v in the container", read, c.name, got, want)
			}
		}
	}
}
