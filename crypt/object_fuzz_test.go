package crypt_test

import (
	"bytes"
	"errors"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// FuzzOpenObject: sealed objects (config sections, index objects,
// snapshots, locks, policies, pins) come from storage. Any bytes, opened
// as any kind with a key of both tiers and with a workspace-only key,
// either open (only a well-formed object of that kind, whose tier the key
// holds) or are refused with an error; never a panic. What opens seals
// again and opens to the same plaintext, and a change to any one byte of
// it is refused.
func FuzzOpenObject(f *testing.F) {
	all := crypt.NewMasterKeys()
	wsOnly, err := all.Restrict([]blob.Tier{blob.Workspace})
	if err != nil {
		f.Fatal(err)
	}
	for _, tier := range blob.Tiers {
		for _, kind := range []crypt.ObjectKind{crypt.KindConfig, crypt.KindSnapshot, crypt.KindLock, crypt.KindPin} {
			obj := crypt.SealObject(mustTier(f, all, tier), kind, []byte(`{"version":1}`))
			f.Add(obj, uint8(kind))
			f.Add(obj, uint8(crypt.KindIndex)) // the wrong kind
		}
	}
	empty := crypt.SealObject(mustTier(f, all, blob.Workspace), crypt.KindIndex, nil)
	f.Add(empty, uint8(crypt.KindIndex))
	f.Add(empty[:crypt.ObjectHeaderSize+crypt.Overhead-1], uint8(crypt.KindIndex))
	f.Add([]byte("LBO\x02\x00\x02"), uint8(crypt.KindIndex))
	f.Add(append([]byte("LBO\x01\x09\x02"), make([]byte, crypt.Overhead)...), uint8(crypt.KindIndex))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, want uint8) {
		kind := crypt.ObjectKind(want)
		hdrTier, hdrKind, hdrErr := crypt.ObjectTier(data)
		for _, m := range []*crypt.MasterKeys{all, wsOnly} {
			tier, plain, err := crypt.OpenObject(m, kind, data)
			if err != nil {
				if plain != nil {
					t.Fatalf("refused object came with %d plaintext bytes", len(plain))
				}
				if hdrErr == nil && hdrKind == kind && !m.Has(hdrTier) && !errors.Is(err, crypt.ErrTierLocked) {
					t.Fatalf("object of a tier the key lacks: %v; want ErrTierLocked", err)
				}
				continue
			}
			if hdrErr != nil || hdrKind != kind || hdrTier != tier || !m.Has(tier) {
				t.Fatalf("opened an object with header % x (%v) as %s of tier %s", data[:min(len(data), crypt.ObjectHeaderSize)], hdrErr, kind, tier)
			}
			if len(plain) != len(data)-crypt.ObjectHeaderSize-crypt.Overhead {
				t.Fatalf("%d plaintext bytes from a %d-byte object", len(plain), len(data))
			}
			again := crypt.SealObject(mustTier(t, m, tier), kind, plain)
			if _, p2, err := crypt.OpenObject(m, kind, again); err != nil || !bytes.Equal(p2, plain) {
				t.Fatalf("sealed again, it opens to %q, %v", p2, err)
			}
			for _, i := range []int{0, 3, 4, 5, crypt.ObjectHeaderSize, len(data) / 2, len(data) - 1} {
				changed := bytes.Clone(data)
				changed[i] ^= 0x01
				if _, _, err := crypt.OpenObject(m, kind, changed); err == nil {
					t.Fatalf("object with byte %d changed opens", i)
				}
			}
		}
	})
}
