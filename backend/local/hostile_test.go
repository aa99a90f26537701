package local

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/backendtest"
)

// TestHostileNames: no invalid handle writes or deletes outside the repo.
func TestHostileNames(t *testing.T) {
	t.Parallel()
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
