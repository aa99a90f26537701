package location

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/backend/s3"
	"lifeboat/internal/s3test"
)

func TestFromEnv(t *testing.T) {
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "tok",
		"AWS_DEFAULT_REGION": "eu-west-2", "AWS_REGION": "eu-west-1", "LIFEBOAT_REPOSITORY_S3_ADDRESSING": "path"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var o S3
	o.FromEnv(lookup)
	if o.AccessKeyID != "AKID" || o.SecretAccessKey != "secret" || o.SessionToken != "tok" || o.Region != "eu-west-1" || o.Addressing != s3.AddressPath {
		t.Errorf("FromEnv: %+v", o)
	}
	// A key id from the config keeps its own secret: the environment's
	// belongs to another key id.
	o = S3{AccessKeyID: "FROMCONFIG", SecretAccessKey: "config-secret"}
	o.FromEnv(lookup)
	if o.AccessKeyID != "FROMCONFIG" || o.SecretAccessKey != "config-secret" || o.SessionToken != "" {
		t.Errorf("FromEnv over the config's key: %+v", o)
	}
}

// TestOpenKinds: a path opens the local backend, an s3: location the S3
// one; Create refuses a location holding a config with ErrExists; a bad
// s3: location is an error naming what a location looks like.
func TestOpenKinds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	be, err := Create(t.Context(), dir, S3{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := be.(*local.Backend); !ok {
		t.Fatalf("Create(%s) is a %T", dir, be)
	}
	if err := be.Save(t.Context(), backend.Handle{Type: backend.Config}, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(t.Context(), dir, S3{}); !errors.Is(err, backend.ErrExists) {
		t.Fatalf("Create over a repository: %v, want ErrExists", err)
	}
	if _, err := Open(t.Context(), "s3:https://host", S3{}); !errors.Is(err, s3.ErrConfig) || !strings.Contains(err.Error(), "BUCKET") {
		t.Fatalf("Open of a location without a bucket: %v", err)
	}

	srv := s3test.Start(t)
	creds := S3{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
	loc := srv.Location("made-by-create", "p")
	be, err = Create(t.Context(), loc, creds)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := be.(*s3.Backend); !ok || be.Location() != loc {
		t.Fatalf("Create(%s) is a %T at %s", loc, be, be.Location())
	}
	if err := be.Save(t.Context(), backend.Handle{Type: backend.Config}, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(t.Context(), loc, creds); !errors.Is(err, backend.ErrExists) {
		t.Fatalf("Create over an S3 repository: %v, want ErrExists", err)
	}
	for op, f := range map[string]func(context.Context, string, S3) (backend.Backend, error){"Open": Open, "Create": Create} {
		if _, err := f(t.Context(), loc, S3{}); !errors.Is(err, s3.ErrConfig) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
			t.Fatalf("%s without credentials: %v, want an ErrConfig naming AWS_ACCESS_KEY_ID", op, err)
		}
	}
}
