package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend/local"
	"lifeboat/crypt"
	"lifeboat/repo"
)

// --replace of a directory that holds the repository deletes the repository.
func TestRegressionReplaceDeletesRepo(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	repoDir := filepath.Join(home, "backups")
	be, err := local.Create(repoDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Init(ctx, be, rsTestPassword, repo.InitOptions{KDF: crypt.NewKDFParams(1, 64, 1)}); err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, be, rsTestPassword, repo.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rr := &rsRepo{Repository: r, path: repoDir}
	m := rr.manifest(t, rr.dir(t, "root", rr.file(t, "f", []byte("hello"))), true)
	if _, err := Restore(ctx, r, m, RestoreOptions{Target: home, Replace: true}); !errors.Is(err, ErrTargetHoldsRepository) {
		t.Fatalf("restore --replace over the repository's parent: %v, want ErrTargetHoldsRepository", err)
	}
	if _, err := os.Stat(repoDir); err != nil {
		t.Errorf("repository gone after restore --replace of its parent: %v", err)
	}
}
