package crypt_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

var update = flag.Bool("update", false, "rewrite the golden samples in testdata/golden-v1")

// Pinned samples of format v1: a key file, the blob ids its keys give, and
// a sealed object. Created once with -update; a change to the key file,
// KDF, AEAD, blob id or object layout makes this test fail.
const (
	goldenDir      = "testdata/golden-v1"
	goldenPassword = "lifeboat golden password"
	goldenBlob     = "lifeboat golden blob"
	goldenObject   = "lifeboat golden object"
)

var goldenRepoID = blob.ID{0xde, 0xad, 0xbe, 0xef, 31: 0x01}

type goldenIDs struct {
	Workspace blob.ID `json:"workspace_blob_id"`
	Sensitive blob.ID `json:"sensitive_blob_id"`
}

func TestGoldenV1(t *testing.T) {
	t.Parallel()
	if *update {
		writeGolden(t)
	}
	keyFile := readGolden(t, "keyfile.json")
	kf, err := crypt.DecodeKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	m, err := kf.Open([]byte(goldenPassword), goldenRepoID)
	if err != nil {
		t.Fatal(err)
	}
	var want goldenIDs
	if err := json.Unmarshal(readGolden(t, "ids.json"), &want); err != nil {
		t.Fatal(err)
	}
	got := goldenIDs{
		Workspace: mustTier(t, m, blob.Workspace).BlobID([]byte(goldenBlob)),
		Sensitive: mustTier(t, m, blob.Sensitive).BlobID([]byte(goldenBlob)),
	}
	if got != want {
		t.Fatalf("blob ids %+v, pinned %+v", got, want)
	}
	tier, plain, err := crypt.OpenObject(m, crypt.KindSnapshot, readGolden(t, "object.bin"))
	if err != nil || tier != blob.Sensitive || string(plain) != goldenObject {
		t.Fatalf("pinned object: tier %s, %q, %v", tier, plain, err)
	}
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatalf("%v (run with -update to create the samples)", err)
	}
	return b
}

func writeGolden(t *testing.T) {
	t.Helper()
	m := crypt.NewMasterKeys()
	kf, err := crypt.NewKeyFile(m, blob.Tiers, []byte(goldenPassword), crypt.NewKDFParams(1, 64, 1), goldenRepoID, crypt.KeyFileMeta{Hostname: "golden"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := json.MarshalIndent(goldenIDs{
		Workspace: mustTier(t, m, blob.Workspace).BlobID([]byte(goldenBlob)),
		Sensitive: mustTier(t, m, blob.Sensitive).BlobID([]byte(goldenBlob)),
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	obj := crypt.SealObject(mustTier(t, m, blob.Sensitive), crypt.KindSnapshot, []byte(goldenObject))
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"keyfile.json": kf, "ids.json": ids, "object.bin": obj} {
		if err := os.WriteFile(filepath.Join(goldenDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
