package local

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"lifeboat/backend"
)

// TestPinsDir: pins/ (format addition) is made by Create like every type
// directory, and a repository made before it existed lists no pins and
// gets the directory at its first pin.
func TestPinsDir(t *testing.T) {
	if !slices.Contains(backend.FileTypes, backend.Pin) || backend.Pin != "pins" {
		t.Fatalf("FileTypes %v lacks pins", backend.FileTypes)
	}
	if !slices.Contains(subdirs(), "pins") {
		t.Fatalf("Create does not make pins/: %v", subdirs())
	}
	b := newRepo(t)
	if err := os.Remove(filepath.Join(b.dir, "pins")); err != nil { // as made by an older lifeboat
		t.Fatal(err)
	}
	if err := b.List(t.Context(), backend.Pin, func(backend.FileInfo) error { return errors.New("listed") }); err != nil {
		t.Fatalf("listing pins of an older repository: %v", err)
	}
	h, data := packOf(10)
	pin := backend.Handle{Type: backend.Pin, Name: h.Name}
	if err := pin.Valid(); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(t.Context(), pin, data); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "pins", h.Name)); err != nil {
		t.Fatal(err)
	}
	if pin.String() != "pins/"+h.Name {
		t.Errorf("handle %s", pin)
	}
}
