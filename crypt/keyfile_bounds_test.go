package crypt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
)

var boundsRepoID = blob.ID{9, 9, 9}

// withKDF re-encodes key file data with other argon2id parameters: what
// anyone who can write to keys/ can forge without knowing a password.
func withKDF(t *testing.T, data []byte, timeCost, memoryKiB uint32) []byte {
	t.Helper()
	var kf KeyFile
	if err := json.Unmarshal(data, &kf); err != nil {
		t.Fatal(err)
	}
	kf.KDF.Time, kf.KDF.MemoryKiB = timeCost, memoryKiB
	out, err := json.Marshal(kf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func smallKeyFile(t *testing.T, m *MasterKeys, kdf KDFParams) []byte {
	t.Helper()
	data, err := sealKeyFile(m, blob.Tiers, []byte("pw"), kdf, boundsRepoID, KeyFileMeta{Created: time.Unix(1e9, 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The key-file denial of service: a forged key file asking for
// 1 GiB and 16 passes (what older Lifeboats allowed) decodes, so it can be
// listed and removed, but opening it with a password derives nothing and
// says why; parameters beyond that do not even decode. Not parallel: it
// counts derivations.
func TestKeyFileBeyondBoundsRefusedBeforeDerivation(t *testing.T) {
	valid := smallKeyFile(t, NewMasterKeys(), NewKDFParams(1, 64, 1))
	before := KeyDerivations()

	attack := withKDF(t, valid, 16, 1024*1024)
	kf, err := DecodeKeyFile(attack)
	if err != nil {
		t.Fatalf("a key file within the older bounds does not decode: %v", err)
	}
	_, err = kf.Open([]byte("pw"), boundsRepoID)
	if !errors.Is(err, ErrKDFCost) || !strings.Contains(err.Error(), "16 passes over 1048576 KiB") {
		t.Fatalf("Open of 1 GiB, 16 passes: %v; want ErrKDFCost naming the parameters", err)
	}
	for name, p := range map[string][2]uint32{
		"time 9":             {9, 64},
		"memory 256 MiB + 1": {1, MaxKDFMemoryKiB + 1},
	} {
		kf, err := DecodeKeyFile(withKDF(t, valid, p[0], p[1]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := kf.Open([]byte("pw"), boundsRepoID); !errors.Is(err, ErrKDFCost) {
			t.Fatalf("%s: Open = %v, want ErrKDFCost", name, err)
		}
	}
	for name, p := range map[string][2]uint32{
		"time 17":          {17, 64},
		"memory 1 GiB + 1": {1, legacyMaxKDFMemoryKiB + 1},
		"memory 4 GiB":     {1, 1<<32 - 1},
	} {
		data := withKDF(t, valid, p[0], p[1])
		if _, err := DecodeKeyFile(data); !errors.Is(err, ErrNotKeyFile) || !errors.Is(err, ErrKDFCost) {
			t.Fatalf("%s: DecodeKeyFile = %v, want ErrNotKeyFile and ErrKDFCost", name, err)
		}
		// Even a caller that builds the KeyFile itself gets no derivation.
		var kf KeyFile
		if err := json.Unmarshal(data, &kf); err != nil {
			t.Fatal(err)
		}
		if _, err := kf.OpenAboveBounds([]byte("pw"), boundsRepoID); !errors.Is(err, ErrKDFCost) {
			t.Fatalf("%s: OpenAboveBounds = %v, want ErrKDFCost", name, err)
		}
	}
	if d := KeyDerivations() - before; d != 0 {
		t.Fatalf("%d derivations for key files beyond the bounds, want 0", d)
	}

	// At the bound: accepted (decoded and valid; deriving it would take
	// seconds, so this test does not).
	kf, err = DecodeKeyFile(withKDF(t, valid, MaxKDFTime, MaxKDFMemoryKiB))
	if err != nil {
		t.Fatal(err)
	}
	if err := kf.KDF.Validate(); err != nil {
		t.Fatalf("parameters at the documented bound refused: %v", err)
	}
}

// NewKeyFile creates nothing beyond the bounds, and refuses before it
// derives.
func TestNewKeyFileRefusesBeyondBounds(t *testing.T) {
	m := NewMasterKeys()
	before := KeyDerivations()
	for _, p := range []KDFParams{NewKDFParams(MaxKDFTime+1, 64, 1), NewKDFParams(1, MaxKDFMemoryKiB+1, 1), NewKDFParams(16, 1024*1024, 4)} {
		if _, err := NewKeyFile(m, blob.Tiers, []byte("pw"), p, boundsRepoID, KeyFileMeta{}, nil); !errors.Is(err, ErrKDFCost) {
			t.Fatalf("NewKeyFile(time %d, memory %d KiB) = %v, want ErrKDFCost", p.Time, p.MemoryKiB, err)
		}
	}
	if d := KeyDerivations() - before; d != 0 {
		t.Fatalf("%d derivations, want 0", d)
	}
}

// A key file an older Lifeboat made with more passes than the bounds allow
// (12 passes over 64 KiB: cheap, but beyond time 8) is refused by Open and
// opened by OpenAboveBounds, which the repository uses only for a key file
// the user named.
func TestKeyFileOfOlderLifeboat(t *testing.T) {
	m := NewMasterKeys()
	data := smallKeyFile(t, m, NewKDFParams(12, 64, 1))
	kf, err := DecodeKeyFile(data)
	if err != nil {
		t.Fatal(err)
	}
	before := KeyDerivations()
	if _, err := kf.Open([]byte("pw"), boundsRepoID); !errors.Is(err, ErrKDFCost) {
		t.Fatalf("Open: %v, want ErrKDFCost", err)
	}
	if d := KeyDerivations() - before; d != 0 {
		t.Fatalf("Open derived %d times", d)
	}
	if _, err := kf.OpenAboveBounds([]byte("wrong"), boundsRepoID); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("OpenAboveBounds, wrong password: %v", err)
	}
	got, err := kf.OpenAboveBounds([]byte("pw"), boundsRepoID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tier := range blob.Tiers {
		g, _ := got.Tier(tier)
		w, _ := m.Tier(tier)
		if g == nil || g.Enc != w.Enc || g.IDKey != w.IDKey {
			t.Fatalf("%s tier keys differ", tier)
		}
	}
	if d := KeyDerivations() - before; d != 2 {
		t.Fatalf("two OpenAboveBounds calls derived %d times", d)
	}
}
