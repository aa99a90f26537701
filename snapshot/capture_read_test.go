package snapshot

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
