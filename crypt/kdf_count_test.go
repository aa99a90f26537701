package crypt_test

import (
	"errors"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// KeyDerivations counts one derivation per key file made or opened with a
// password, a wrong one included, and none for work with unlocked keys.
// (Not parallel: it reads a process-wide counter.)
func TestKeyDerivationsCount(t *testing.T) {
	m := crypt.NewMasterKeys()
	before := crypt.KeyDerivations()
	data := newKeyFile(t, m, blob.Tiers)
	if got := crypt.KeyDerivations() - before; got != 1 {
		t.Fatalf("NewKeyFile: %d derivations, want 1", got)
	}
	if _, err := openKeyFile(data, testPassword, testRepoID); err != nil {
		t.Fatal(err)
	}
	if _, err := openKeyFile(data, []byte("wrong"), testRepoID); !errors.Is(err, crypt.ErrWrongPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	if got := crypt.KeyDerivations() - before; got != 3 {
		t.Fatalf("after two opens: %d derivations, want 3", got)
	}
	k := mustTier(t, m, blob.Workspace)
	crypt.NewSealer(k.Enc).Seal(nil, []byte("data"), nil)
	if _, err := crypt.DecodeKeyFile(data); err != nil {
		t.Fatal(err)
	}
	if got := crypt.KeyDerivations() - before; got != 3 {
		t.Fatalf("sealing with an unlocked key or decoding a key file derived a key: %d", got)
	}
}
