package capture

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/internal/seedtest"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/race"
	"lifeboat/snapshot/internal/snaptest"
)

// capTestOpenFds counts this process's open descriptors.
//
// The count is the whole process's: a test that takes it runs alone (not
// t.Parallel), and the runtime's poller, which opens its descriptors at
// its first use and keeps them, is started first.
func capTestOpenFds(t testing.TB) int {
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

func TestCaptureDeepTree(t *testing.T) { // not parallel: it counts the process's descriptors
	const depth = 10000
	root := t.TempDir()
	// Made with mkdirat/openat: the path is far longer than PATH_MAX.
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		nfd, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(fd)
		fd = nfd
	}
	for _, name := range []string{"bottom", "zz"} { // after and before the way back up
		ffd, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(ffd, []byte("deep down")); err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(ffd)
	}
	_ = unix.Close(fd)
	capTestWrite(t, root, map[string]string{"top": "top"})

	r := capTestOpenRepo(t)
	var read atomic.Int64
	o := capTestOptions(&read)
	// With at most 256 descriptors, holding one per level would fail.
	before := capTestOpenFds(t)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = 256
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	m, err := Run(context.Background(), r, root, o)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !m.Complete || m.Totals.Dirs != depth+1 || m.Totals.Files != 3 || read.Load() != 2*9+3 {
		t.Fatalf("complete %v, errors %v, totals %+v, read %d", m.Complete, m.Errors, m.Totals, read.Load())
	}
	if after := capTestOpenFds(t); after > before {
		t.Errorf("%d descriptors open after the capture, %d before", after, before)
	}
	subtree := m.Root.Subtree
	for level := 0; ; level++ {
		var next []blob.ID
		var names []string
		err := snapshot.LoadDir(context.Background(), r, blob.Workspace, subtree, func(n *snapshot.Node) error {
			names = append(names, string(n.Name))
			switch {
			case n.Type == snapshot.TypeDir:
				next = n.Subtree
			case string(n.Name) == "bottom" || string(n.Name) == "zz":
				if c := capTestContent(t, r, n); string(c) != "deep down" {
					t.Errorf("level %d: %s holds %q", level, n.Name, c)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("level %d: %v", level, err)
		}
		if next == nil {
			if level != depth || len(names) != 2 {
				t.Fatalf("tree ends at level %d with %q, want %d", level, names, depth)
			}
			break
		}
		subtree = next
	}
	snaptest.Check(t, r)
}

func TestCaptureDescriptorWindow(t *testing.T) {
	t.Parallel()
	// Walking back up through closed descriptors, with files at every level
	// still being read (many readers, a deep narrow tree).
	root := t.TempDir()
	p := root
	files := map[string]string{}
	rel := ""
	for i := range 3 * capMaxHeld {
		rel = filepath.Join(rel, "l"+strconv.Itoa(i))
		files[filepath.Join(rel, "f")] = "level " + strconv.Itoa(i)
		files[filepath.Join(rel, "~after")] = "after " + strconv.Itoa(i)
	}
	capTestWrite(t, p, files)
	r := capTestOpenRepo(t)
	o := capTestOptions(nil)
	o.Readers = 7
	m := capTestCapture(t, r, root, o)
	if !m.Complete {
		t.Fatal(m.Errors)
	}
	capTestCompare(t, r, root, m)
}

func TestCaptureHugeDirectory(t *testing.T) {
	t.Parallel()
	n := 200_000
	if os.Getenv("LIFEBOAT_TEST_HUGE") != "" {
		n = 1_000_000
	}
	root := t.TempDir()
	dir := filepath.Join(root, "huge")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		fd, err := unix.Openat(dfd, "entry-"+strconv.Itoa(i), unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if i%50_000 == 0 {
			_, _ = unix.Write(fd, []byte(strconv.Itoa(i)))
		}
		_ = unix.Close(fd)
	}
	_ = unix.Close(dfd)
	t.Logf("made %d entries in %v", n, time.Since(start))
	start = time.Now()
	r := capTestOpenRepo(t)
	m := capTestCapture(t, r, root, capTestOptions(nil))
	t.Logf("captured in %v: %+v", time.Since(start), m.Totals)
	if !m.Complete || m.Totals.Files != uint64(n) {
		t.Fatalf("complete %v, totals %+v", m.Complete, m.Totals)
	}
	start = time.Now()
	var huge *snapshot.Node
	err = snapshot.LoadDir(context.Background(), r, blob.Workspace, m.Root.Subtree, func(x *snapshot.Node) error { c := *x; huge = &c; return nil })
	if err != nil || huge == nil {
		t.Fatal(err)
	}
	if want := (n + snapshot.MaxNodesPerBlob - 1) / snapshot.MaxNodesPerBlob; len(huge.Subtree) != want {
		t.Errorf("%d entries in %d tree blobs, want %d", n, len(huge.Subtree), want)
	}
	count := 0
	var last []byte
	err = snapshot.LoadDir(context.Background(), r, blob.Workspace, huge.Subtree, func(x *snapshot.Node) error {
		count++
		last = append(last[:0], x.Name...)
		return nil
	})
	if err != nil || count != n || string(last) != "entry-99999" && n == 200_000 {
		t.Errorf("listed %d entries (%v), last %q", count, err, last)
	}
	t.Logf("listed back in %v", time.Since(start))
}

func TestCaptureSparseFile(t *testing.T) {
	t.Parallel()
	size := int64(4 << 30)
	if race.Enabled {
		size = 1 << 30 // the race detector slows chunking ~10x
	}
	root := t.TempDir()
	f, err := os.Create(filepath.Join(root, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), size-3); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	r := capTestOpenRepo(t)
	var read atomic.Int64
	start := time.Now()
	m := capTestCapture(t, r, root, capTestOptions(&read))
	t.Logf("%d MiB sparse file captured in %v: %+v", size>>20, time.Since(start), m.Totals)
	got := capTestFlatten(t, r, m.Root.Subtree)["sparse"]
	if got == nil || got.Size != uint64(size) || read.Load() != size {
		t.Fatalf("sparse node %+v, read %d", got, read.Load())
	}
	distinct := map[blob.ID]bool{}
	for _, id := range got.Content {
		distinct[id] = true
	}
	if len(distinct) > 3 || m.Totals.NewBytes > 32<<20 {
		t.Errorf("%d chunks, %d distinct, %d new bytes: zeros did not dedup", len(got.Content), len(distinct), m.Totals.NewBytes)
	}
	var total uint64
	for _, id := range got.Content {
		loc, ok, err := r.LookupBlob(blob.Workspace, blob.Data, id)
		if err != nil || !ok {
			t.Fatalf("chunk %s: %v %v", id.Short(), ok, err)
		}
		total += uint64(loc.PlainLen)
	}
	if total != uint64(size) {
		t.Errorf("chunks add up to %d bytes, want %d", total, size)
	}
}

func TestCaptureExcludes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{
		"keep.go": "k", "a.o": "o", "src/b.o": "o", "src/keep.c": "c",
		"build/out": "x", "src/build/out": "x", "docs/tmp/x": "x", "docs/keep": "k", "deep/docs/tmp/y": "y",
	})
	r := capTestOpenRepo(t)
	o := capTestOptions(nil)
	o.Excludes = []string{"*.o", "build", "/docs/tmp/"}
	m := capTestCapture(t, r, root, o)
	got := capTestFlatten(t, r, m.Root.Subtree)
	var names []string
	for p, n := range got {
		if n.Type == snapshot.TypeFile {
			names = append(names, p)
		}
	}
	want := map[string]bool{"keep.go": true, "src/keep.c": true, "docs/keep": true, "deep/docs/tmp/y": true}
	if len(names) != len(want) {
		t.Errorf("captured %q, want %v", names, want)
	}
	for _, p := range names {
		if !want[p] {
			t.Errorf("%s captured", p)
		}
	}
	if !m.Complete || got["docs/tmp"] != nil || got["build"] != nil {
		t.Errorf("complete %v, errors %v", m.Complete, m.Errors)
	}
}

func TestCaptureSparseReader(t *testing.T) {
	t.Parallel()
	// Data and holes in every order; the reader must give the same bytes
	// as a plain read, whatever extents the filesystem reports.
	rng := seedtest.Rand(t)
	for round := range 20 {
		p := filepath.Join(t.TempDir(), "f")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		size := int64(rng.IntN(8<<20) + 1)
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		for range rng.IntN(6) {
			off := rng.Int64N(size)
			b := make([]byte, min(size-off, int64(rng.IntN(200<<10)+1)))
			for i := range b {
				b[i] = byte(rng.Uint32() | 1)
			}
			if _, err := f.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
		}
		_ = f.Close()
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		rd := &capFileReader{fd: fd, sparse: true}
		var got []byte
		buf := make([]byte, rng.IntN(300<<10)+1)
		for {
			n, err := rd.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		_ = unix.Close(fd)
		if !bytes.Equal(got, want) || rd.n != size {
			t.Fatalf("round %d: read %d bytes, want %d; equal %v", round, len(got), size, bytes.Equal(got, want))
		}
	}
}
