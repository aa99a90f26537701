package local

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/backendtest"
)

func TestConformance(t *testing.T) {
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
	h, data := packOf(100)
	if err := b.Save(t.Context(), h, data); err != nil {
		t.Fatal(err)
	}
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

func TestCreateOpen(t *testing.T) {
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

// TestHostileNames: no invalid handle writes or deletes outside the repo.
func TestHostileNames(t *testing.T) {
	parent := t.TempDir()
	b, err := Create(filepath.Join(parent, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(parent, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostile := append(backendtest.InvalidHandles,
		backend.Handle{Type: backend.Key, Name: "../../victim"},
		backend.Handle{Type: backend.Config, Name: "../victim"},
	)
	for _, h := range hostile {
		if err := b.Save(t.Context(), h, []byte("evil")); err == nil {
			t.Errorf("Save %q/%q: no error", h.Type, h.Name)
		}
		if err := b.Remove(t.Context(), h); err == nil {
			t.Errorf("Remove %q/%q: no error", h.Type, h.Name)
		}
	}
	var files []string
	filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if len(files) != 1 || files[0] != victim {
		t.Errorf("files after hostile saves: %v, want only %s", files, victim)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Errorf("victim file changed: %q", got)
	}
}

// TestHugeRangeNoAlloc: a range past the end fails before allocating.
func TestHugeRangeNoAlloc(t *testing.T) {
	b := newRepo(t)
	h, data := packOf(10)
	if err := b.Save(t.Context(), h, data); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(t.Context(), h, 0, 1<<40); !errors.Is(err, backend.ErrShortRead) {
		t.Errorf("Load of 1 TiB from 10 bytes: %v", err)
	}
}

func TestListSkipsJunk(t *testing.T) {
	b := newRepo(t)
	h, data := packOf(5)
	if err := b.Save(t.Context(), h, data); err != nil {
		t.Fatal(err)
	}
	junk := []string{
		"data/" + h.Name[:2] + "/XYZ",
		"data/zz/abcd",                // wrong shard for its name
		"data/" + h.Name[:2] + "/" + h.Name + ".tmp",
		"data/stray",                  // file where a shard dir belongs
		"keys/.DS_Store",
		"keys/abcd~",
		"tmp/save-1234",
	}
	for _, j := range junk {
		p := filepath.Join(b.dir, j)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(b.dir, "keys", "abcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, ft := range backend.FileTypes {
		var got []string
		if err := b.List(t.Context(), ft, func(fi backend.FileInfo) error {
			got = append(got, fi.Name)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := 0
		if ft == backend.Pack {
			want = 1
		}
		if len(got) != want {
			t.Errorf("List %s: %v, want %d valid file(s)", ft, got, want)
		}
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

func TestLoadExactBytes(t *testing.T) {
	b := newRepo(t)
	h, data := packOf(3 << 20)
	if err := b.Save(t.Context(), h, data); err != nil {
		t.Fatal(err)
	}
	got, err := b.Load(t.Context(), h, 1<<20+5, 1<<20)
	if err != nil || !bytes.Equal(got, data[1<<20+5:2<<20+5]) || cap(got) != 1<<20 {
		t.Errorf("ranged Load: len %d cap %d, %v", len(got), cap(got), err)
	}
}
