package s3

import (
	"testing"

	"lifeboat/internal/s3test"
)

// newTestBackend opens a fresh bucket (under prefix, when not "") on srv.
func newTestBackend(t testing.TB, srv *s3test.Server, prefix string) *Backend {
	t.Helper()
	loc, err := ParseLocation(srv.Location(srv.NewBucket(t), prefix))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(t.Context(), testConfig(srv, loc))
	if err != nil {
		t.Fatalf("Open %s: %v", loc, err)
	}
	return b
}

func testConfig(srv *s3test.Server, loc Location) Config {
	return Config{Location: loc, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Addressing: AddressPath}
}
