package capture

import (
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// capTestBigDir makes dir with n empty files and returns a handle on it.
func capTestBigDir(t *testing.T, dir string, n int) *capHandle {
	t.Helper()
	if err := unix.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ffd, err := unix.Openat(fd, "entry-"+strconv.Itoa(i), unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(ffd)
	}
	return newCapHandle(fd)
}

// capTestOpenDir opens dir as the walker does a directory it descends
// into: a held descriptor, its device and inode.
func capTestOpenDir(t *testing.T, dir string) *capDir {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return &capDir{h: newCapHandle(fd), dev: st.Dev, ino: st.Ino}
}

// capTestAheadCapturer is a capturer enough for list and take, without a
// file cache or workers.
func capTestAheadCapturer(t *testing.T) *capturer {
	t.Helper()
	excl, err := newCapExcludes(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &capturer{o: Options{hooks: &captureHooks{}}, excl: excl}
}

// capTestAheadLimits sets smaller limits on listing ahead for one test,
// so that it needs fewer files. They are package variables that every
// capture reads: a test that calls it must not run in parallel.
func capTestAheadLimits(t *testing.T, names int, entries int64) {
	oldNames, oldEntries := capAheadNames, capAheadEntries
	capAheadNames, capAheadEntries = names, entries
	t.Cleanup(func() { capAheadNames, capAheadEntries = oldNames, oldEntries })
}

// A worker listing ahead a directory too large to hold stops reading it
// soon after capAheadNames entries: several workers meeting huge
// directories side by side must not each hold a whole listing at once.
// Not parallel: it counts the process's allocations.
func TestCaptureAheadListingBounded(t *testing.T) {
	capTestAheadLimits(t, 1024, 4096)
	n := 20 * capAheadNames
	h := capTestBigDir(t, filepath.Join(t.TempDir(), "big"), n)
	defer h.release()
	c := capTestAheadCapturer(t)
	d := &capDir{h: h}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	l := c.list(d, capAheadNames)
	runtime.ReadMemStats(&after)
	if !l.later || l.err != nil || l.names != nil {
		t.Fatalf("listing of %d entries ahead: later %v, err %v, %d names", n, l.later, l.err, len(l.names))
	}
	if got := after.Mallocs - before.Mallocs; got > uint64(4*capAheadNames) {
		t.Errorf("listing a directory of %d entries ahead made %d allocations; want at most %d", n, got, 4*capAheadNames)
	}
	// The walker lists it again from the start, whole.
	if _, err := unix.Seek(h.fd, 0, 0); err != nil {
		t.Fatal(err)
	}
	if l := c.list(d, 0); l.err != nil || len(l.names) != n {
		t.Fatalf("listing again: %v, %d names, want %d", l.err, len(l.names), n)
	}
}

// A directory the walker opens itself (no worker had started on it) is
// listed once, whatever its size: left "for later", it would be read twice.
func TestCaptureAheadWalkerListsOnce(t *testing.T) {
	capTestAheadLimits(t, 1024, 4096)
	n := 2 * capAheadNames
	root := t.TempDir()
	capTestBigDir(t, filepath.Join(root, "big"), n).release()
	d := capTestOpenDir(t, root)
	defer d.h.release()
	c := capTestAheadCapturer(t)
	listed := 0
	c.o.hooks.listed = func(string) { listed++ }
	a := newCapAhead(d, "big", c)
	c.take(a)
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.child.h.release()
	if a.list.later || len(a.list.names) != n || listed != 1 {
		t.Errorf("the walker's own listing of %d entries: later %v, %d names, listed %d times", n, a.list.later, len(a.list.names), listed)
	}
}

// Directories too large to list ahead, beside each other so that workers
// start on them and stop part way, are listed again whole by the walker:
// every entry is captured.
func TestCaptureAheadLargeDirectories(t *testing.T) {
	capTestAheadLimits(t, 1024, 4096)
	n := 3 * capAheadNames
	root := t.TempDir()
	for _, d := range []string{"a", "b", "c", "d"} {
		capTestBigDir(t, filepath.Join(root, d), n).release()
		capTestWrite(t, filepath.Join(root, d), map[string]string{"sub/file": d, "zz": d})
	}
	r := capTestOpenRepo(t)
	m := capTestCapture(t, r, root, capTestOptions(nil))
	if !m.Complete || m.Totals.Files != uint64(4*(n+2)) || m.Totals.Dirs != 9 {
		t.Fatalf("complete %v, totals %+v, errors %v", m.Complete, m.Totals, m.Errors)
	}
	capTestCompare(t, r, root, m)
}

// Directories listed ahead count their entries until the walker takes
// them; one that would take the total over capAheadEntries is left for
// the walker, and taking them gives the entries back.
func TestCaptureAheadEntriesBudget(t *testing.T) {
	capTestAheadLimits(t, 100, 250)
	root := t.TempDir()
	names := []string{"a", "b", "c"}
	for _, name := range names {
		capTestBigDir(t, filepath.Join(root, name), 100).release()
	}
	d := capTestOpenDir(t, root)
	defer d.h.release()
	c := capTestAheadCapturer(t)
	var as []*capAhead
	for _, name := range names {
		a := newCapAhead(d, name, c)
		a.taken.Store(true) // as a worker does
		a.open(c, capAheadNames)
		if a.err != nil {
			t.Fatal(a.err)
		}
		defer a.child.h.release()
		as = append(as, a)
	}
	if as[0].list.later || as[1].list.later || !as[2].list.later {
		t.Fatalf("listed ahead within a total of 250 entries: later = %v, %v, %v; want false, false, true",
			as[0].list.later, as[1].list.later, as[2].list.later)
	}
	if got := c.ahead.entries.Load(); got != 200 {
		t.Fatalf("%d entries held ahead, want 200", got)
	}
	for _, a := range as {
		c.take(a)
	}
	if got := c.ahead.entries.Load(); got != 0 {
		t.Fatalf("%d entries still held after the walker took every directory", got)
	}
}
