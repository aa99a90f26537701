package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend"
)

func TestCreateOpen(t *testing.T) {
	t.Parallel()
	b := newRepo(t)
	if err := b.Save(t.Context(), backend.Handle{Type: backend.Config}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(b.dir); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Create over a repository: %v, want 'already exists'", err)
	}
	if _, err := Open(b.dir); err != nil {
		t.Errorf("Open: %v", err)
	}
	empty := t.TempDir()
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "no repository") {
		t.Errorf("Open of an empty dir: %v, want 'no repository'", err)
	}
	if _, err := Open(filepath.Join(empty, "missing")); err == nil {
		t.Errorf("Open of a missing dir: no error")
	}
}

// TestMissingTypeDir: Open writes nothing; a dropped empty type dir lists
// as empty and is recreated by the next Save.
func TestMissingTypeDir(t *testing.T) {
	b := newRepo(t)
	for _, d := range []string{"index", "tmp", "data"} {
		if err := os.Remove(filepath.Join(b.dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Open(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "index")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open recreated index/: %v", err)
	}
	if err := b.List(t.Context(), backend.Index, func(backend.FileInfo) error { return errors.New("listed") }); err != nil {
		t.Errorf("List of a missing dir: %v", err)
	}
	h, data := packOf(10)
	idx := backend.Handle{Type: backend.Index, Name: h.Name}
	for _, h := range []backend.Handle{h, idx} {
		if err := b.Save(t.Context(), h, data); err != nil {
			t.Fatalf("Save %s into a missing dir: %v", h, err)
		}
	}
}

// TestRootNotRecreated: if the repository vanishes (disk unmounted), Save
// fails instead of recreating it on the mount point.
func TestRootNotRecreated(t *testing.T) {
	b := newRepo(t)
	if err := os.RemoveAll(b.dir); err != nil {
		t.Fatal(err)
	}
	h, data := packOf(10)
	if err := b.Save(t.Context(), h, data); err == nil {
		t.Fatal("Save into a vanished repository: no error")
	}
	if _, err := os.Stat(b.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Save recreated the repository root: %v", err)
	}
}
