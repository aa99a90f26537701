package capture

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// capTestReadAll reads rd to its end with reads of n bytes.
func capTestReadAll(t *testing.T, rd *capFileReader, n int) []byte {
	t.Helper()
	var got []byte
	buf := make([]byte, n)
	for {
		m, err := rd.Read(buf)
		got = append(got, buf[:m]...)
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The reader stops at a short read that ends at the size fstat gave, and
// once at the end it does not read again (the fstat after the read is
// what notices a file that grew). Without a size it reads until a pread
// returns nothing, and a size that is stale (the file shrank) does not
// cut the read short.
func TestCapFileReaderEnd(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	grow := func() {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("abcde"); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}

	rd := &capFileReader{fd: fd, size: 10}
	if n, err := rd.Read(make([]byte, 512)); n != 10 || err != nil {
		t.Fatalf("first read: %d, %v", n, err)
	}
	grow() // 15 bytes now; the reader already knows where the file ended
	if n, err := rd.Read(make([]byte, 512)); n != 0 || err != io.EOF {
		t.Fatalf("read after a short read at the size: %d, %v; want 0, EOF", n, err)
	}

	rd = &capFileReader{fd: fd} // size unknown (0)
	if got := capTestReadAll(t, rd, 4); string(got) != "0123456789abcde" {
		t.Fatalf("read without a size: %q", got)
	}
	grow()
	if n, err := rd.Read(make([]byte, 512)); n != 0 || err != io.EOF {
		t.Fatalf("read after the end: %d, %v; want 0, EOF without reading again", n, err)
	}

	rd = &capFileReader{fd: fd, size: 100} // stale: the file has 20 bytes
	if got := capTestReadAll(t, rd, 512); string(got) != "0123456789abcdeabcde" {
		t.Fatalf("read with a stale size: %q", got)
	}
}

// A file whose name holds a directory, a FIFO or another regular file by
// the time a reader opens it: the first two are recorded as replaced (the
// reader stat'ed nothing before its read, the walk's lstat stood in), and
// the new regular file is read whole, with its own metadata.
func TestCaptureFileReplacedBeforeRead(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{"dir": "was a file", "fifo": "was a file", "other": "old content", "keep": "kept"})
	r := capTestOpenRepo(t)
	o := capTestOptions(nil)
	o.hooks.beforeOpen = func(p string) {
		full := filepath.Join(root, p)
		if p == "keep" {
			return
		}
		if err := os.Remove(full); err != nil {
			t.Error(err)
			return
		}
		var err error
		switch p {
		case "dir":
			err = os.Mkdir(full, 0o755)
		case "fifo":
			err = unix.Mkfifo(full, 0o644)
		case "other":
			err = os.WriteFile(full, []byte("a new, longer content"), 0o600)
		}
		if err != nil {
			t.Error(err)
		}
	}
	m := capTestCapture(t, r, root, o)
	errs := capTestErrors(m)
	if m.Complete || errs["dir"] != errNotRegular.Error() || errs["fifo"] != errNotRegular.Error() || len(errs) != 2 {
		t.Fatalf("complete %v, errors %q", m.Complete, errs)
	}
	got := capTestFlatten(t, r, m.Root.Subtree)
	if content := string(capTestContent(t, r, got["other"])); content != "a new, longer content" ||
		got["other"].Size != uint64(len(content)) || got["other"].Mode&0o777 != 0o600 {
		t.Fatalf("replaced file captured as %q, size %d, mode %o", content, got["other"].Size, got["other"].Mode)
	}
}
