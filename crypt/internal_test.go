package crypt

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"lifeboat/blob"
)

// TestArgon2idKnownAnswer pins the key-encryption key derived for a fixed
// password, salt and parameters: if the KDF or its parameter mapping ever
// changes, every existing key file stops opening, and this test says so.
func TestArgon2idKnownAnswer(t *testing.T) {
	t.Parallel()
	salt := make([]byte, saltSize)
	for i := range salt {
		salt[i] = byte(i)
	}
	cases := []struct {
		p    KDFParams
		want string
	}{
		{KDFParams{Algorithm: "argon2id", Time: 1, MemoryKiB: 64, Threads: 1, Salt: salt}, "da1aebe764f4e4a2614b8c4a8488b223e546dec13ffc77a693ac917cf47410f5"},
		{KDFParams{Algorithm: "argon2id", Time: 2, MemoryKiB: 256, Threads: 2, Salt: salt}, "6a713793e9bbb202788e117eb7d01c4c5bd1f04637b2fad90118019b5f3d405f"},
	}
	for _, c := range cases {
		got := c.p.derive([]byte("correct horse battery staple"))
		if h := hex.EncodeToString(got[:]); h != c.want {
			t.Errorf("derive(t=%d m=%d p=%d) = %s, want %s", c.p.Time, c.p.MemoryKiB, c.p.Threads, h, c.want)
		}
	}
}

// TestKeyAADLayout pins the additional data that binds sealed key material
// to its repository and tier list.
func TestKeyAADLayout(t *testing.T) {
	t.Parallel()
	var repo blob.ID
	for i := range repo {
		repo[i] = byte(0xc0 + i)
	}
	meta := KeyFileMeta{Created: time.Date(2026, 11, 29, 12, 0, 0, 5, time.UTC), Hostname: "h", Username: "ab"}
	got := keyAAD(repo, []blob.Tier{blob.Workspace, blob.Sensitive}, meta)
	want := append(append([]byte("lifeboat-key-v1\x00"), repo[:]...), 1, 2)
	want = append(want, 30, 0)
	want = append(want, "2026-11-29T12:00:00.000000005Z"...)
	want = append(want, 1, 0, 'h', 2, 0, 'a', 'b')
	if string(got) != string(want) {
		t.Fatalf("keyAAD = %x, want %x", got, want)
	}
	if string(keyAAD(repo, []blob.Tier{blob.Workspace}, meta)) == string(got) {
		t.Fatal("tier list is not bound")
	}
	meta.Hostname = "other"
	if string(keyAAD(repo, []blob.Tier{blob.Workspace, blob.Sensitive}, meta)) == string(got) {
		t.Fatal("host name is not bound")
	}
}

// TestWorkspaceOnlyKeyFileHoldsNoSensitiveBytes opens the sealed payload of
// a workspace-only key file and checks it carries no sensitive-tier key.
func TestWorkspaceOnlyKeyFileHoldsNoSensitiveBytes(t *testing.T) {
	t.Parallel()
	m := NewMasterKeys()
	var repo blob.ID
	kdf := NewKDFParams(1, 64, 1)
	data, err := NewKeyFile(m, []blob.Tier{blob.Workspace}, []byte("pw"), kdf, repo, KeyFileMeta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kf, err := DecodeKeyFile(data)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewSealer(kf.KDF.derive([]byte("pw"))).Open(nil, kf.Data, keyAAD(repo, kf.Tiers, kf.Meta()))
	if err != nil {
		t.Fatal(err)
	}
	var mat keyMaterial
	if err := json.Unmarshal(plain, &mat); err != nil {
		t.Fatal(err)
	}
	if len(mat.Tiers) != 1 {
		t.Fatalf("sealed material holds %d tiers, want 1", len(mat.Tiers))
	}
	if _, ok := mat.Tiers[blob.Workspace]; !ok {
		t.Fatal("sealed material lacks the workspace tier")
	}
	s := m.tiers[blob.Sensitive]
	for _, k := range []Key{s.Enc, s.IDKey} {
		if containsBytes(plain, k[:]) || containsBytes(plain, []byte(hex.EncodeToString(k[:]))) {
			t.Fatal("workspace-only key material contains a sensitive key")
		}
	}
	// The sealed map is keyed by tier name, not number: pin that too.
	if !containsBytes(plain, []byte(`"workspace"`)) {
		t.Fatal("sealed material does not name its tier as text")
	}
}

func containsBytes(b, sub []byte) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return true
		}
	}
	return false
}

// TestKeyFileOpenChecksMaterial seals key material that disagrees with the
// declared tier list under the right password and AAD: Open must refuse it.
func TestKeyFileOpenChecksMaterial(t *testing.T) {
	t.Parallel()
	var repo blob.ID
	kdf := NewKDFParams(1, 64, 1)
	key := make([]byte, KeySize)
	good := tierMaterial{Enc: key, ID: key}
	cases := map[string]struct {
		declared []blob.Tier
		plain    string
	}{
		"extra tier":     {[]blob.Tier{blob.Workspace}, mustJSON(t, keyMaterial{Tiers: map[blob.Tier]tierMaterial{blob.Workspace: good, blob.Sensitive: good}})},
		"missing tier":   {[]blob.Tier{blob.Workspace, blob.Sensitive}, mustJSON(t, keyMaterial{Tiers: map[blob.Tier]tierMaterial{blob.Workspace: good}})},
		"short enc key":  {[]blob.Tier{blob.Workspace}, mustJSON(t, keyMaterial{Tiers: map[blob.Tier]tierMaterial{blob.Workspace: {Enc: key[:31], ID: key}}})},
		"long id key":    {[]blob.Tier{blob.Workspace}, mustJSON(t, keyMaterial{Tiers: map[blob.Tier]tierMaterial{blob.Workspace: {Enc: key, ID: append(key, 0)}}})},
		"not json":       {[]blob.Tier{blob.Workspace}, "not json"},
		"unknown tier":   {[]blob.Tier{blob.Workspace}, `{"tiers":{"workspace":{"enc":"","id":""},"root":{}}}`},
		"numeric tier":   {[]blob.Tier{blob.Workspace}, `{"tiers":{"1":{"enc":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","id":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}}`},
		"empty material": {[]blob.Tier{blob.Workspace}, `{}`},
	}
	for name, c := range cases {
		kf := &KeyFile{Version: KeyFileVersion, Tiers: c.declared, KDF: kdf}
		kf.Data = NewSealer(kdf.derive([]byte("pw"))).Seal(nil, []byte(c.plain), keyAAD(repo, c.declared, kf.Meta()))
		if m, err := kf.Open([]byte("pw"), repo); err == nil {
			t.Errorf("%s: opened with tiers %v", name, m.Tiers())
		} else if !errors.Is(err, ErrNotKeyFile) {
			t.Errorf("%s: got %v, want ErrNotKeyFile", name, err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
