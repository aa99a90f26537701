package crypt_test

import (
	"errors"
	"slices"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// FuzzDecodeKeyFile feeds arbitrary bytes to the key file decoder, then
// opens what parses with the golden password (the seed corpus holds the
// golden key file, so the success path is reached too). Whatever the bytes,
// nothing beyond the KDF bounds is derived.
func FuzzDecodeKeyFile(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"tiers":["workspace"],"kdf":{"algorithm":"argon2id","time":1,"memory_kib":8,"threads":1,"salt":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},"data":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))
	// The key-file denial of service: 1 GiB and 16 passes (decodes, never derived),
	// and one pass more (does not decode).
	f.Add([]byte(`{"version":1,"tiers":["workspace"],"kdf":{"algorithm":"argon2id","time":16,"memory_kib":1048576,"threads":4,"salt":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},"data":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))
	f.Add([]byte(`{"version":1,"tiers":["workspace"],"kdf":{"algorithm":"argon2id","time":17,"memory_kib":64,"threads":1,"salt":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},"data":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		kf, err := crypt.DecodeKeyFile(data)
		if err != nil {
			if !errors.Is(err, crypt.ErrNotKeyFile) || kf != nil {
				t.Fatalf("DecodeKeyFile = %v, %v; want nil and ErrNotKeyFile", kf, err)
			}
			return
		}
		// It decodes within the bounds of older Lifeboats; beyond today's
		// bounds only the cost may be wrong, and Open then refuses it
		// without deriving anything.
		if err := kf.KDF.Validate(); err != nil {
			if !errors.Is(err, crypt.ErrKDFCost) {
				t.Fatalf("decoded key file has invalid kdf parameters: %v", err)
			}
			before := crypt.KeyDerivations()
			if m, err := kf.Open([]byte(goldenPassword), goldenRepoID); m != nil || !errors.Is(err, crypt.ErrKDFCost) {
				t.Fatalf("Open beyond the bounds = %v, %v; want nil and ErrKDFCost", m, err)
			}
			if crypt.KeyDerivations() != before {
				t.Fatal("Open derived a key beyond the bounds")
			}
			return
		}
		if len(kf.Tiers) == 0 || kf.Tiers[0] != blob.Workspace || len(kf.Tiers) > len(blob.Tiers) {
			t.Fatalf("decoded key file has tier list %v", kf.Tiers)
		}
		if len(kf.Data) < crypt.Overhead {
			t.Fatalf("decoded key file has %d bytes of sealed data", len(kf.Data))
		}
		// Validate allows up to 256 MiB and 8 passes: far too slow to fuzz.
		if kf.KDF.MemoryKiB > 1024 || kf.KDF.Time > 2 {
			return
		}
		m, err := kf.Open([]byte(goldenPassword), goldenRepoID)
		if err != nil {
			if m != nil || (!errors.Is(err, crypt.ErrWrongPassword) && !errors.Is(err, crypt.ErrNotKeyFile)) {
				t.Fatalf("Open = %v, %v; want nil and ErrWrongPassword or ErrNotKeyFile", m, err)
			}
			return
		}
		if !slices.Equal(m.Tiers(), kf.Tiers) {
			t.Fatalf("opened tiers %v, declared %v", m.Tiers(), kf.Tiers)
		}
		for _, tier := range blob.Tiers {
			k, err := m.Tier(tier)
			if slices.Contains(kf.Tiers, tier) != (err == nil) {
				t.Fatalf("Tier(%s) = %v with declared tiers %v", tier, err, kf.Tiers)
			}
			if err == nil && k.Tier != tier {
				t.Fatalf("keys of %s labelled %s", tier, k.Tier)
			}
		}
	})
}
