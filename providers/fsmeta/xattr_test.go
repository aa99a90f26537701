//go:build linux

package fsmeta

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestXattrs(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user.b", []byte("\x00\xff"), 0); err != nil {
		if Unsupported(err) {
			t.Skipf("filesystem under %s takes no user xattrs", dir)
		}
		t.Fatal(err)
	}
	big := make([]byte, 3000)
	for i := range big {
		big[i] = byte(i)
	}
	for name, v := range map[string][]byte{"user.a": big, "user.empty": nil} {
		if err := unix.Setxattr(f, name, v, 0); err != nil {
			t.Fatal(err)
		}
	}
	xs, err := LXattrs(f, User)
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 3 || xs[0].Name != "user.a" || string(xs[0].Value) != string(big) ||
		xs[1].Name != "user.b" || string(xs[1].Value) != "\x00\xff" || xs[2].Name != "user.empty" || len(xs[2].Value) != 0 {
		t.Fatalf("LXattrs = %q", xs)
	}
	h, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fx, err := FdXattrs(int(h.Fd()), func(n string) bool { return n == "user.b" })
	if err != nil || len(fx) != 1 || fx[0].Name != "user.b" {
		t.Fatalf("FdXattrs with a filter = %q, %v", fx, err)
	}
	// A symlink's own attributes, never its target's.
	l := filepath.Join(dir, "l")
	if err := os.Symlink("f", l); err != nil {
		t.Fatal(err)
	}
	if lx, err := LXattrs(l, User); err != nil || len(lx) != 0 {
		t.Fatalf("LXattrs of a symlink = %q, %v", lx, err)
	}
}
