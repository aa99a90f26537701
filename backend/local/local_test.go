package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/backendtest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, func(t *testing.T) backend.Backend { return newRepo(t) })
}

func TestLayoutAndModes(t *testing.T) {
	b := newRepo(t)
	for _, sub := range subdirs() {
		fi, err := os.Stat(filepath.Join(b.dir, sub))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v; want a 0700 directory", sub, err, fi.Mode())
		}
	}
	h, _ := savePack(t, b, 100)
	cfg := backend.Handle{Type: backend.Config, Name: "config"}
	if err := b.Save(t.Context(), cfg, []byte("cfg")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		filepath.Join(b.dir, "data", h.Name[:2], h.Name),
		filepath.Join(b.dir, "config"),
	} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want a 0600 file", p, err, fi.Mode())
		}
	}
	if fi, err := os.Stat(filepath.Join(b.dir, "data", h.Name[:2])); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("shard dir: %v, want 0700", err)
	}
	if left := tmpEntries(t, b); len(left) != 0 {
		t.Errorf("tmp/ after Saves: %v", left)
	}
}

func TestErrorsNamePath(t *testing.T) {
	b := newRepo(t)
	h, _ := packOf(1)
	_, err := b.Load(t.Context(), h, 0, 0)
	if !errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), filepath.Join(b.dir, "data")) {
		t.Errorf("Load missing: %v; want ErrNotFound naming the path", err)
	}
	if err := b.Save(t.Context(), h, []byte("a")); err != nil {
		t.Fatal(err)
	}
	_, err = b.Load(t.Context(), h, 0, 2)
	if !errors.Is(err, backend.ErrShortRead) || !strings.Contains(err.Error(), h.Name) {
		t.Errorf("Load past end: %v; want ErrShortRead naming the file", err)
	}
}
