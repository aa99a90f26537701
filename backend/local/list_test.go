package local

import (
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
)

func TestListSkipsJunk(t *testing.T) {
	b := newRepo(t)
	h, _ := savePack(t, b, 5)
	junk := []string{
		"data/" + h.Name[:2] + "/XYZ",
		"data/zz/abcd", // wrong shard for its name
		"data/" + h.Name[:2] + "/" + h.Name + ".tmp",
		"data/stray", // file where a shard dir belongs
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
