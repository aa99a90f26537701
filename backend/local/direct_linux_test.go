package local

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// directTestFile creates a temp file the way the backend does and skips
// when the test's filesystem refuses O_DIRECT.
func directTestFile(t *testing.T) *directFile {
	t.Helper()
	f, err := osCreateTemp(t.TempDir(), tempPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := f.(*directFile)
	if !ok {
		f.Close()
		t.Skip("the test directory's filesystem refuses O_DIRECT")
	}
	t.Cleanup(func() { d.Close() })
	if !isDirect(t, d.File) {
		t.Fatal("newDirectFile returned a directFile without O_DIRECT set")
	}
	return d
}

func isDirect(t *testing.T, f *os.File) bool {
	t.Helper()
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fl&unix.O_DIRECT != 0
}

// TestDirectFileWrites writes random pieces (many smaller than a block,
// some larger than the buffer) and checks the file holds exactly them
// after Sync, for lengths that end on and off a block boundary.
func TestDirectFileWrites(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, total := range []int{0, 1, directAlign, directAlign + 1, directBuffer, directBuffer + 7, 3*directBuffer + directAlign*5 + 123} {
		d := directTestFile(t)
		want := make([]byte, total)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		for p := want; len(p) > 0; {
			n := min(len(p), 1+rng.IntN(directBuffer*3/2))
			if rng.IntN(4) > 0 {
				n = min(len(p), 1+rng.IntN(3*directAlign))
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

// TestDirectFileRefusedWrite gives the file a buffer the kernel refuses
// for direct I/O (misaligned in memory): the write fails with EINVAL and
// the file goes on through the page cache with nothing lost.
func TestDirectFileRefusedWrite(t *testing.T) {
	d := directTestFile(t)
	raw := make([]byte, directBuffer+directAlign+1)
	misaligned := raw[1:1:directBuffer] // 4 KiB aligned plus one byte: never aligned
	if addr(misaligned)%directAlign == 0 {
		misaligned = raw[2:2:directBuffer]
	}
	putDirectBuf(d.buf)
	d.buf = &misaligned // dropped, not pooled, once written
	want := bytes.Repeat([]byte("lifeboat"), directBuffer/8*2+3)
	if _, err := d.Write(want); err != nil {
		t.Fatalf("Write: %v (a refused direct write must fall back to the page cache)", err)
	}
	if err := d.wait(); err != nil {
		t.Fatal(err)
	}
	if d.direct || isDirect(t, d.File) {
		t.Fatal("O_DIRECT still set after the kernel refused a direct write")
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	fileHolds(t, d.Name(), want, "after the fallback:")
}

// TestSaveTempDirect stores a pack-sized temp file through the backend and
// reads it back: the direct path end to end, rename and all.
func TestSaveTempDirect(t *testing.T) {
	b, err := Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.CreateTemp()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(tempFile).file.(*directFile); !ok {
		t.Skip("the test directory's filesystem refuses O_DIRECT")
	}
	h, data := packOf(5*directBuffer/2 + 99)
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

// TestDirectFileWriterInterfaces writes through io.WriteString and
// io.Copy, which use a writer's WriteString or ReadFrom when it has them:
// every byte must still go through the buffer, in order.
func TestDirectFileWriterInterfaces(t *testing.T) {
	d := directTestFile(t)
	var f file = d
	want := bytes.Repeat([]byte("0123456789abcdef"), directBuffer/16+300)
	if _, err := f.Write(want[:100]); err != nil {
		t.Fatal(err)
	}
	text := string(want[100:5000]) // through the writer's WriteString, if it had one
	if _, err := io.WriteString(f, text); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, strings.NewReader(string(want[5000:directBuffer+1000]))); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, io.MultiReader(bytes.NewReader(want[directBuffer+1000:]))); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	fileHolds(t, f.Name(), want, "")
}

// TestDirectFileRefusedAfterShortWrite has the kernel take the first 64
// KiB of a direct write and refuse the rest with EINVAL: the fallback
// through the page cache writes only the rest, not the taken part again.
func TestDirectFileRefusedAfterShortWrite(t *testing.T) {
	d := directTestFile(t)
	refused := false
	d.write = func(b []byte) (int, error) {
		if !refused && len(b) > 64<<10 {
			refused = true
			n, err := d.File.Write(b[:64<<10])
			if err != nil {
				return n, err
			}
			return n, &os.PathError{Op: "write", Path: d.Name(), Err: syscall.EINVAL}
		}
		return d.File.Write(b)
	}
	want := bytes.Repeat([]byte("lifeboat"), directBuffer/8*2+3)
	if _, err := d.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if !refused || d.direct || isDirect(t, d.File) {
		t.Fatalf("refused %v, direct %v: the refusal did not clear O_DIRECT", refused, d.direct)
	}
	fileHolds(t, d.Name(), want, "")
}

// TestDirectFileBackgroundError fails the write of a full buffer made in
// the background: the error comes back from a later Write once the writer
// has met it, or from Sync, and sticks; Close after it releases
// everything.
func TestDirectFileBackgroundError(t *testing.T) {
	for _, at := range []string{"write", "sync"} {
		d := directTestFile(t)
		d.write = func(b []byte) (int, error) {
			return 0, &os.PathError{Op: "write", Path: d.Name(), Err: syscall.ENOSPC}
		}
		if _, err := d.Write(make([]byte, directBuffer)); err != nil {
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
				_, err = d.Write(make([]byte, directBuffer))
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

// TestDirectFileCloseInFlight closes a file (DiscardTemp) while a full
// buffer is being written: Close waits for the write, so nothing runs on
// the closed descriptor and no goroutine is left behind.
func TestDirectFileCloseInFlight(t *testing.T) {
	d := directTestFile(t)
	release := make(chan struct{})
	d.write = func(b []byte) (int, error) {
		<-release
		return d.File.Write(b)
	}
	if _, err := d.Write(make([]byte, directBuffer+10)); err != nil {
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

// TestDirectFileWriteAfterSync syncs at block boundaries and off them, then
// writes on: the file stays in order, whether O_DIRECT is kept (aligned
// Sync) or cleared (a partial block), and a second Sync changes nothing.
func TestDirectFileWriteAfterSync(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for _, cuts := range [][]int{
		{directAlign, directBuffer, 2 * directBuffer},
		{directBuffer + 5, directBuffer + 5, 3*directBuffer + 1},
		{0, directBuffer - 1, directBuffer + directAlign},
	} {
		d := directTestFile(t)
		want := make([]byte, cuts[len(cuts)-1]+directBuffer/2+17)
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
			if c%directAlign == 0 && d.direct != isDirect(t, d.File) {
				t.Fatalf("cuts %v: direct %v disagrees with the descriptor", cuts, d.direct)
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

// TestDirectFileQueue holds the device on the first full buffer's write:
// directQueue more full buffers are still taken without waiting (a Write
// that waited would hang the test), then everything reaches the file in
// order once the device goes on.
func TestDirectFileQueue(t *testing.T) {
	d := directTestFile(t)
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
	for i := range 1 + directQueue {
		b := bytes.Repeat([]byte{byte('a' + i)}, directBuffer)
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
