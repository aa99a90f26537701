package local

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/internal/nstest"
)

// smallTmpfs mounts a 256 KiB tmpfs for the test, or skips it when this
// process may not mount one.
func smallTmpfs(t *testing.T) string { return nstest.Tmpfs(t, "size=256k,mode=0700") }

// TestRealDiskFull fills a 256 KiB tmpfs until the kernel says ENOSPC.
func TestRealDiskFull(t *testing.T) {
	mnt := smallTmpfs(t)
	b, err := Create(filepath.Join(mnt, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var saved []backend.Handle
	data := map[backend.Handle][]byte{}
	var failed backend.Handle
	var failedData []byte
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("256 KiB tmpfs never filled up")
		}
		h, d := packOf(20 << 10)
		if err = b.Save(ctx, h, d); err != nil {
			failed, failedData = h, d
			break
		}
		saved = append(saved, h)
		data[h] = d
	}
	if !errors.Is(err, backend.ErrNoSpace) {
		t.Fatalf("Save on a full disk: %v, want ErrNoSpace", err)
	}
	t.Logf("full-disk error: %v", err)
	if !strings.Contains(err.Error(), mnt) {
		t.Errorf("error does not name the disk: %v", err)
	}
	if len(saved) == 0 {
		t.Fatal("not even one file fitted")
	}
	if _, err := b.Stat(ctx, failed); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Stat of the failed save: %v, want ErrNotFound", err)
	}
	if left := tmpEntries(t, b); len(left) != 0 {
		t.Errorf("temp files left on the full disk: %v", left)
	}
	listed := 0
	err = b.List(ctx, backend.Pack, func(fi backend.FileInfo) error {
		listed++
		if fi.Size != 20<<10 {
			t.Errorf("half-written file visible: %s has %d bytes", fi.Name, fi.Size)
		}
		return nil
	})
	if err != nil || listed != len(saved) {
		t.Errorf("List on a full disk: %d files, %v; want %d", listed, err, len(saved))
	}
	for _, h := range saved {
		got, err := b.Load(ctx, h, 0, 0)
		if err != nil || !bytes.Equal(got, data[h]) {
			t.Errorf("Load %s after disk full: %d bytes, %v", h, len(got), err)
		}
	}
	// Freeing space makes Saves work again.
	for _, h := range saved[:2] {
		if err := b.Remove(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Save(ctx, failed, failedData); err != nil {
		t.Errorf("Save after freeing space: %v", err)
	}
}

// TestRealDiskFullTemp streams a 1 MiB temp file (a pack) into a 256 KiB
// tmpfs through CreateTemp and SaveTemp: whether the kernel's ENOSPC comes
// back from a Write (a buffer written in the background) or from SaveTemp,
// it is ErrNoSpace, nothing is stored and no temp file is left.
func TestRealDiskFullTemp(t *testing.T) {
	b, f, _ := behindTestTemp(t, smallTmpfs(t))
	h, data := packOf(1 << 20)
	var err error
	for p := data; len(p) > 0 && err == nil; p = p[min(len(p), 64<<10):] {
		_, err = f.Write(p[:min(len(p), 64<<10)])
	}
	if err != nil {
		b.DiscardTemp(f)
	} else {
		err = b.SaveTemp(t.Context(), h, f)
	}
	if !errors.Is(err, backend.ErrNoSpace) {
		t.Fatalf("a 1 MiB temp file on a 256 KiB disk: %v, want ErrNoSpace", err)
	}
	t.Logf("full-disk error: %v", err)
	if _, err := b.Stat(t.Context(), h); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Stat of the failed save: %v, want ErrNotFound", err)
	}
	if left := tmpEntries(t, b); len(left) != 0 {
		t.Errorf("temp files left on the full disk: %v", left)
	}
}
