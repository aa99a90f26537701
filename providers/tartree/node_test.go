//go:build linux

package tartree

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/providers/fsmeta"
)

func deviceStream(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, h := range []tar.Header{
		{Name: "dev/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt},
		{Name: "dev/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o640, ModTime: mt},
		{Name: "dev/sda", Typeflag: tar.TypeBlock, Devmajor: 8, Mode: 0o600, ModTime: mt},
	} {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	return &buf
}

// TestExtractMakesDevicesAsNodes: a device is extracted as a node of its
// type with device number 0 (never the device it names), its mode and
// mtime; where no device node can be made (no CAP_MKNOD) the error is a
// *fsmeta.CannotCreate naming it and saying what to do.
func TestExtractMakesDevicesAsNodes(t *testing.T) {
	if os.Geteuid() == 0 {
		dst := t.TempDir()
		if err := Extract(context.Background(), deviceStream(t), open(t, dst), ExtractOptions{Where: "the mirror", Provider: "docker"}); err != nil {
			t.Fatal(err)
		}
		for name, typ := range map[string]fs.FileMode{"dev/null": fs.ModeDevice | fs.ModeCharDevice, "dev/sda": fs.ModeDevice} {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(dst, name), &st); err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Lstat(filepath.Join(dst, name))
			if fi.Mode().Type() != typ || st.Rdev != 0 || fi.ModTime().Year() != 2024 {
				t.Fatalf("%s: %v rdev %d mtime %v, want type %v rdev 0 mtime 2024", name, fi.Mode(), st.Rdev, fi.ModTime(), typ)
			}
		}
	}
	// Without CAP_MKNOD.
	defer func(f func(int, string, uint32, int) error) { mknodat = f }(mknodat)
	mknodat = func(int, string, uint32, int) error { return unix.EPERM }
	err := Extract(context.Background(), deviceStream(t), open(t, t.TempDir()), ExtractOptions{Where: "the mirror of container c", Provider: "docker"})
	var cc *fsmeta.CannotCreate
	if !errors.As(err, &cc) || cc.Rel != "dev/null" {
		t.Fatalf("Extract without CAP_MKNOD = %v, want a *fsmeta.CannotCreate naming dev/null", err)
	}
	for _, want := range []string{"character device dev/null", "the mirror of container c", "root", "remove it from the workspace or exclude it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
}
