package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/location"
	"lifeboat/internal/s3test"
)

// Store is one place a repository can live.
type Store struct {
	Kind     string // "local" or "s3"
	Location string // a directory, or an s3: location
	S3       location.S3
	env      []string
}

// Each runs fn as a subtest per kind of storage, with an empty place for a
// repository: "local" (a temp dir) and "s3" (a fresh bucket on a
// versitygw started once for this call; skipped without the binary, a
// failure under LIFEBOAT_CI=1).
func Each(t *testing.T, fn func(t *testing.T, s Store)) {
	t.Run("local", func(t *testing.T) { fn(t, Local(t)) })
	t.Run("s3", func(t *testing.T) { fn(t, S3(t, s3test.Start(t))) })
}

// Local is an empty temp dir.
func Local(t testing.TB) Store {
	return Store{Kind: "local", Location: filepath.Join(t.TempDir(), "repo")}
}

// S3 is a fresh bucket on srv, under a prefix.
func S3(t testing.TB, srv *s3test.Server) Store {
	return Store{Kind: "s3", Location: srv.Location(srv.NewBucket(t), "repo"), env: srv.Env(),
		S3: location.S3{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}}
}

// Env is what a child process needs in its environment to open the
// store (the AWS_* credentials for S3; nothing for local).
func (s Store) Env() []string { return s.env }

// Create prepares the store for a new repository and returns its backend,
// closed when the test ends.
func (s Store) Create(t testing.TB) backend.Backend {
	t.Helper()
	be, err := location.Create(context.Background(), s.Location, s.S3)
	if err != nil {
		t.Fatalf("creating %s: %v", s.Location, err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// Open opens the store's repository; the backend is closed when the test
// ends.
func (s Store) Open(t testing.TB) backend.Backend {
	t.Helper()
	be, err := location.Open(context.Background(), s.Location, s.S3)
	if err != nil {
		t.Fatalf("opening %s: %v", s.Location, err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// At is the store at loc as a child process sees it: a directory, or an
// s3: location with the credentials of the environment (Env of the
// parent's store).
func At(loc string) Store {
	s := Store{Kind: "local", Location: loc}
	if location.IsS3(loc) {
		s.Kind = "s3"
		s.S3.FromEnv(os.LookupEnv)
	}
	return s
}
