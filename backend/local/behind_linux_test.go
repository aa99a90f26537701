package local

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"lifeboat/backend"
	"lifeboat/internal/seedtest"
)

// behindTestFile creates a temp file the way the backend does.
func behindTestFile(t *testing.T) *behindFile {
	t.Helper()
	f, err := osCreateTemp(t.TempDir(), tempPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := f.(*behindFile)
	if !ok {
		f.Close()
		t.Fatalf("osCreateTemp returned a %T, want a *behindFile", f)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// behindTestTemp creates a repository in dir and a temp file in it
// through the backend, with the file's write-behind.
func behindTestTemp(t *testing.T, dir string) (*Backend, backend.TempFile, *behindFile) {
	t.Helper()
	b, err := Create(filepath.Join(dir, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.CreateTemp()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := f.(tempFile).file.(*behindFile)
	if !ok {
		t.Fatalf("CreateTemp returned a %T, want a *behindFile", f.(tempFile).file)
	}
	return b, f, d
}

// TestBehindFileWrites writes random pieces (many small, some larger than
// the buffer) and checks the file holds exactly them after Sync, for
// lengths around the buffer and several write-behind steps.
func TestBehindFileWrites(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)
	for _, total := range []int{0, 1, behindBuffer - 1, behindBuffer, behindBuffer + 7, behindStep, 3*behindStep + 5*behindBuffer/3} {
		d := behindTestFile(t)
		want := make([]byte, total)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		for p := want; len(p) > 0; {
			n := min(len(p), 1+rng.IntN(behindBuffer*3/2))
			if rng.IntN(4) > 0 {
				n = min(len(p), 1+rng.IntN(12<<10))
			}
			if m, err := d.Write(p[:n]); err != nil || m != n {
				t.Fatalf("total %d: Write(%d bytes) = %d, %v", total, n, m, err)
			}
			p = p[n:]
		}
		if err := d.Sync(); err != nil {
			t.Fatalf("total %d: Sync: %v", total, err)
		}
		fileHolds(t, d.Name(), want, fmt.Sprintf("total %d:", total))
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Write([]byte{1}); err == nil {
			t.Fatal("Write after Close succeeded")
		}
	}
}

// residentPages counts the pages of the file at path, from byte 0 to
// end, that are in the page cache.
func residentPages(t *testing.T, path string, end int64) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if end == 0 {
		return 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(end), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal("mincore:", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestBehindFileDropsWritten writes a pack of several steps and checks the
// write-behind ran while it was written: all but the last step written
// back and out of the page cache before Sync, and none of the file cached
// after Sync, while it holds what was written.
func TestBehindFileDropsWritten(t *testing.T) {
	d := behindTestFile(t)
	var fs unix.Statfs_t
	if err := unix.Fstatfs(d.fd, &fs); err != nil {
		t.Fatal(err)
	}
	switch fs.Type {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		t.Skip("the test directory is in memory: its pages cannot be dropped")
	case unix.OVERLAYFS_SUPER_MAGIC:
		t.Skip("the test directory is on overlayfs, whose sync_file_range writes nothing back")
	}
	want := bytes.Repeat([]byte("lifeboat write-behind "), (6*behindStep+behindBuffer/2)/22)
	if _, err := d.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := d.wait(); err != nil { // the queue written; the partial buffer is not
		t.Fatal(err)
	}
	if d.noBehind {
		t.Skip("sync_file_range is refused on the test directory's filesystem")
	}
	if steps := d.written / behindStep * behindStep; d.started != steps || d.dropped != steps-behindStep {
		t.Fatalf("written %d: writeback started to %d, dropped to %d; want %d and %d", d.written, d.started, d.dropped, steps, steps-behindStep)
	}
	if n := residentPages(t, d.Name(), d.dropped); n > 0 {
		t.Fatalf("%d pages of the %d bytes dropped are still cached", n, d.dropped)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, d.Name(), int64(len(want))); n > 0 {
		t.Fatalf("%d pages of the synced file are still cached", n)
	}
	fileHolds(t, d.Name(), want, "after the write-behind:")
}

// TestBehindFileWritebackCalls records the write-behind's calls while a
// file is written in pieces, synced halfway and written on: each step's
// writeback is started once it is written, and the step before it waited
// for and dropped, one step behind, with the right offsets and lengths.
func TestBehindFileWritebackCalls(t *testing.T) {
	t.Parallel()
	d := behindTestFile(t)
	const all = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	var got []string
	d.syncRange = func(off, n int64, flags int) error {
		got = append(got, fmt.Sprintf("%#x %d+%d", flags, off, n))
		return unix.SyncFileRange(d.fd, off, n, flags)
	}
	const step, buf = behindStep, behindBuffer
	piece := bytes.Repeat([]byte{7}, 100<<10)
	write := func(n int) {
		for ; n > 0; n -= min(n, len(piece)) {
			if _, err := d.Write(piece[:min(n, len(piece))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(3*step + buf/2)
	if err := d.Sync(); err != nil { // writes the half buffer, drops everything
		t.Fatal(err)
	}
	write(2*step + buf/2) // 5 steps and a buffer in all
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	w := func(off, n int64) string { return fmt.Sprintf("%#x %d+%d", unix.SYNC_FILE_RANGE_WRITE, off, n) }
	a := func(off, n int64) string { return fmt.Sprintf("%#x %d+%d", all, off, n) }
	half := int64(buf / 2)
	want := []string{
		w(0, step), w(step, step), a(0, step), w(2*step, step), a(step, step),
		// After the Sync at 3 steps and a half buffer, everything is
		// dropped; the next start covers what was written since the last.
		w(3*step, step+half), w(4*step+half, step), a(3*step+half, step),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sync_file_range calls:\n got %v\nwant %v", got, want)
	}
}

// TestBehindFileWritebackError has a wait for the writeback fail. EIO is
// how a failed disk shows; EINVAL or EOPNOTSUPP can come from a network or
// FUSE filesystem's failed writeback. Either is a write error, from a later
// Write or from Sync, since the fsync after it would not report it again:
// nothing may be saved.
func TestBehindFileWritebackError(t *testing.T) {
	t.Parallel()
	for _, e := range []unix.Errno{unix.EIO, unix.EINVAL, unix.EOPNOTSUPP} {
		d := behindTestFile(t)
		d.syncRange = func(off, n int64, flags int) error {
			if flags&unix.SYNC_FILE_RANGE_WAIT_AFTER != 0 {
				return e
			}
			return unix.SyncFileRange(d.fd, off, n, flags)
		}
		_, err := d.Write(make([]byte, 3*behindStep))
		if err == nil {
			err = d.Sync()
		}
		if !errors.Is(err, e) || !strings.Contains(err.Error(), "writing back") || !strings.Contains(err.Error(), d.Name()) {
			t.Fatalf("the wait failing with %v: %v, want that error from the writeback, naming the file", e, err)
		}
		if err := d.Sync(); !errors.Is(err, e) {
			t.Fatalf("the wait failing with %v: a second Sync returned %v", e, err)
		}
	}
}

// TestBehindFileWritebackNoSpace has the wait for the writeback find the
// disk full (a thin-provisioned disk, a network filesystem or a quota can
// refuse blocks only then): the backend reports ErrNoSpace, saves nothing
// and leaves no temp file.
func TestBehindFileWritebackNoSpace(t *testing.T) {
	b, f, d := behindTestTemp(t, t.TempDir())
	d.syncRange = func(off, n int64, flags int) error {
		if flags&unix.SYNC_FILE_RANGE_WAIT_AFTER != 0 {
			return unix.ENOSPC
		}
		return nil
	}
	h, data := packOf(3 * behindStep)
	_, err := f.Write(data)
	if err == nil {
		err = b.SaveTemp(t.Context(), h, f)
	} else {
		b.DiscardTemp(f)
	}
	if !errors.Is(err, backend.ErrNoSpace) || !strings.Contains(err.Error(), "writing back") {
		t.Fatalf("writeback without space: %v, want ErrNoSpace from the writeback", err)
	}
	if _, err := b.Load(t.Context(), h, 0, 0); err == nil {
		t.Fatal("the pack was saved although its writeback failed")
	}
	if left, _ := os.ReadDir(filepath.Join(b.Location(), tmpDir)); len(left) > 0 {
		t.Fatalf("temp files left behind: %v", left)
	}
}

// TestBehindFileStartRefused has the call that starts a writeback refused
// (not supported, a system call filter, even EIO, which only a wait would
// report as the file's): the write-behind turns off at once and the fsync
// writes everything.
func TestBehindFileStartRefused(t *testing.T) {
	t.Parallel()
	for _, e := range []unix.Errno{unix.ENOSYS, unix.EPERM, unix.EIO} {
		d := behindTestFile(t)
		calls := 0
		d.syncRange = func(off, n int64, flags int) error { calls++; return e }
		want := bytes.Repeat([]byte("no write-behind here "), 4*behindStep/21)
		if _, err := d.Write(want); err != nil {
			t.Fatalf("%v: %v", e, err)
		}
		if err := d.Sync(); err != nil {
			t.Fatalf("%v: %v", e, err)
		}
		if !d.noBehind || calls != 1 {
			t.Fatalf("%v: write-behind off %v after %d calls, want off after 1", e, d.noBehind, calls)
		}
		fileHolds(t, d.Name(), want, "without write-behind:")
	}
}

// TestSaveTempBehind stores a pack-sized temp file through the backend and
// reads it back: the write-behind end to end, rename and all.
func TestSaveTempBehind(t *testing.T) {
	b, f, _ := behindTestTemp(t, t.TempDir())
	h, data := packOf(5*behindStep/2 + 99)
	for p := data; len(p) > 0; p = p[min(len(p), 300<<10):] {
		if _, err := f.Write(p[:min(len(p), 300<<10)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SaveTemp(t.Context(), h, f); err != nil {
		t.Fatal(err)
	}
	got, err := b.Load(t.Context(), h, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("stored pack differs from what was written (%d bytes, want %d)", len(got), len(data))
	}
}

// TestBehindFileWriterInterfaces writes through io.WriteString and
// io.Copy, which use a writer's WriteString or ReadFrom when it has them:
// every byte must still go through the buffer, in order.
func TestBehindFileWriterInterfaces(t *testing.T) {
	t.Parallel()
	d := behindTestFile(t)
	var f file = d
	want := bytes.Repeat([]byte("0123456789abcdef"), behindBuffer/16+300)
	if _, err := f.Write(want[:100]); err != nil {
		t.Fatal(err)
	}
	text := string(want[100:5000]) // through the writer's WriteString, if it had one
	if _, err := io.WriteString(f, text); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, strings.NewReader(string(want[5000:behindBuffer+1000]))); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, io.MultiReader(bytes.NewReader(want[behindBuffer+1000:]))); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	fileHolds(t, f.Name(), want, "")
}

// TestBehindFileBackgroundError fails the write of a full buffer made in
// the background: the error comes back from a later Write once the writer
// has met it, or from Sync, and sticks; Close after it releases
// everything.
func TestBehindFileBackgroundError(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"write", "sync"} {
		d := behindTestFile(t)
		d.write = func(b []byte) (int, error) {
			return 0, &os.PathError{Op: "write", Path: d.Name(), Err: syscall.ENOSPC}
		}
		if _, err := d.Write(make([]byte, behindBuffer)); err != nil {
			t.Fatalf("%s: the first full buffer's Write returned %v before its write ran", at, err)
		}
		var err error
		if at == "write" {
			// The writer may not have run yet: Writes fill the queue,
			// then wait on it, until the writer's failure shows.
			for i := 0; err == nil; i++ {
				if i > 1000 {
					t.Fatal("the failed background write never surfaced from Write")
				}
				_, err = d.Write(make([]byte, behindBuffer))
			}
		} else {
			err = d.Sync()
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s: the failed background write surfaced as %v", at, err)
		}
		if _, err := d.Write([]byte{1}); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s: Write after the failure: %v", at, err)
		}
		if err := d.Sync(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s: Sync after the failure: %v", at, err)
		}
		if err := d.Close(); err != nil || d.queue != nil {
			t.Fatalf("%s: Close: %v, the writer still running: %v", at, err, d.queue != nil)
		}
	}
}

// TestBehindFileCloseInFlight closes a file (DiscardTemp) while a full
// buffer is being written: Close waits for the write, so nothing runs on
// the closed descriptor and no goroutine is left behind.
func TestBehindFileCloseInFlight(t *testing.T) {
	t.Parallel()
	d := behindTestFile(t)
	release := make(chan struct{})
	d.write = func(b []byte) (int, error) {
		<-release
		return d.File.Write(b)
	}
	if _, err := d.Write(make([]byte, behindBuffer+10)); err != nil {
		t.Fatal(err)
	}
	if d.queue == nil {
		t.Fatal("no writer running after a full buffer")
	}
	closed := make(chan error)
	go func() { closed <- d.Close() }()
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close with a write in flight: %v", err)
	}
	if d.queue != nil || d.ended != nil {
		t.Fatal("Close returned with the writer unaccounted for")
	}
	if err := d.Sync(); err == nil {
		t.Fatal("Sync after Close succeeded")
	}
}

// TestBehindFileWriteAfterSync syncs within a step and on the boundaries
// of buffers and steps, then writes on: the file stays in order, the
// write-behind goes on from where it was, and a second Sync changes
// nothing.
func TestBehindFileWriteAfterSync(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)
	for _, cuts := range [][]int{
		{4 << 10, behindBuffer, 2 * behindBuffer},
		{behindStep + 5, behindStep + 5, 3*behindStep + 1},
		{0, behindBuffer - 1, 2*behindStep + behindBuffer},
	} {
		d := behindTestFile(t)
		want := make([]byte, cuts[len(cuts)-1]+behindStep+17)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		at := 0
		for _, c := range append(cuts, len(want)) {
			if _, err := d.Write(want[at:c]); err != nil {
				t.Fatalf("cuts %v: Write: %v", cuts, err)
			}
			at = c
			for range 2 {
				if err := d.Sync(); err != nil {
					t.Fatalf("cuts %v: Sync at %d: %v", cuts, c, err)
				}
			}
			if got, err := os.ReadFile(d.Name()); err != nil || !bytes.Equal(got, want[:c]) {
				t.Fatalf("cuts %v: after Sync at %d the file holds %d bytes (%v) that differ from those written", cuts, c, len(got), err)
			}
			if d.written != int64(c) || d.dropped != d.written {
				t.Fatalf("cuts %v: after Sync at %d: written %d, dropped to %d", cuts, c, d.written, d.dropped)
			}
		}
	}
}

// fileHolds fails the test unless the file at path holds exactly want;
// what prefixes the message.
func fileHolds(t *testing.T, path string, want []byte, what string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s the file holds %d bytes that differ from the %d written", what, len(got), len(want))
	}
}

// TestBehindFileQueue holds the device on the first full buffer's write:
// behindQueue more full buffers are still taken without waiting (a Write
// that waited would hang the test), then everything reaches the file in
// order once the device goes on.
func TestBehindFileQueue(t *testing.T) {
	t.Parallel()
	d := behindTestFile(t)
	release, started := make(chan struct{}), make(chan struct{}, 1)
	d.write = func(b []byte) (int, error) {
		select {
		case started <- struct{}{}:
			<-release // the first write only
		default:
		}
		return d.File.Write(b)
	}
	var want []byte
	for i := range 1 + behindQueue {
		b := bytes.Repeat([]byte{byte('a' + i)}, behindBuffer)
		if i == 1 {
			<-started // the writer holds the first buffer
		}
		if _, err := d.Write(b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
	}
	tail := []byte("the partial last block")
	if _, err := d.Write(tail); err != nil {
		t.Fatal(err)
	}
	want = append(want, tail...)
	close(release)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	fileHolds(t, d.Name(), want, "after the queued writes,")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
