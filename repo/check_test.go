package repo

import (
	"context"
	"os"
	"testing"

	"lifeboat/blob"
)

func TestCheckFindsDamage(t *testing.T) {
	tr := newTestRepo(t)
	r := tr.open(t, nil, testPassword)
	saveAll(t, r, blob.Workspace, randomBlobs(t, 30, 20, 100<<10))
	saveAll(t, r, blob.Sensitive, randomBlobs(t, 31, 5, 100<<10))
	checkRepo(t, r)

	_, _, path := onePack(t, tr, r)
	b, err := os.ReadFile(path)
	must(t, err)
	b[len(b)/3] ^= 1
	must(t, os.WriteFile(path, b, 0o600))
	res, err := r.Check(context.Background(), CheckOptions{})
	must(t, err)
	if len(res.Problems) != 0 {
		t.Fatalf("a flipped bit inside a blob is invisible without --read-data, got %+v", res.Problems)
	}
	res, err = r.Check(context.Background(), CheckOptions{ReadData: true})
	must(t, err)
	if len(res.Problems) != 1 || res.Problems[0].Kind != "pack_damaged" {
		t.Fatalf("read-data found %+v, want one damaged pack", res.Problems)
	}
	must(t, os.Remove(path))
	res, err = r.Check(context.Background(), CheckOptions{})
	must(t, err)
	if len(res.Problems) != 1 || res.Problems[0].Kind != "pack_missing" {
		t.Fatalf("found %+v, want one missing pack", res.Problems)
	}
}
