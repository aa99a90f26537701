package crypt_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/seedtest"
)

func TestBlobIDKeyed(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := randBytes(r, 5000)
	a := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), crypt.NewRandomKey())
	b := crypt.NewTierKeys(blob.Workspace, a.Enc, crypt.NewRandomKey())
	if a.BlobID(data) == b.BlobID(data) {
		t.Fatal("different id keys gave the same blob id")
	}
	if a.BlobID(data) == blob.ID(blake3.Sum256(data)) {
		t.Fatal("blob id is the unkeyed hash")
	}
	same := crypt.NewTierKeys(blob.Sensitive, crypt.NewRandomKey(), a.IDKey)
	if a.BlobID(data) != same.BlobID(data) {
		t.Fatal("the same id key gave different blob ids")
	}
	if a.BlobID(data) == a.BlobID(data[1:]) {
		t.Fatal("different data gave the same id")
	}
	m := crypt.NewMasterKeys()
	if mustTier(t, m, blob.Workspace).BlobID(data) == mustTier(t, m, blob.Sensitive).BlobID(data) {
		t.Fatal("workspace and sensitive tiers name the same data the same way")
	}
}

// TestBlobIDMatchesFreshHasher checks that a pooled, reset hasher gives the
// same id as a fresh keyed BLAKE3, whatever it hashed before.
func TestBlobIDMatchesFreshHasher(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	k := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), crypt.NewRandomKey())
	for i := range 200 {
		data := randBytes(r, r.IntN(3*1024)+[]int{0, 1024, 64 << 10}[i%3])
		h, err := blake3.NewKeyed(k.IDKey[:])
		if err != nil {
			t.Fatal(err)
		}
		_, _ = h.Write(data)
		if want := blob.ID(h.Sum(nil)); k.BlobID(data) != want {
			t.Fatalf("iteration %d (%d bytes): pooled BlobID differs from a fresh keyed hasher", i, len(data))
		}
	}
	if got, want := k.BlobID(nil), k.BlobID([]byte{}); got != want {
		t.Fatal("nil and empty data have different ids")
	}
}

func TestBlobIDConcurrent(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	k := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), crypt.NewRandomKey())
	inputs := make([][]byte, 16)
	want := make([]blob.ID, len(inputs))
	for i := range inputs {
		inputs[i] = randBytes(r, 1000*i)
		want[i] = k.BlobID(inputs[i])
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				j := (g + i) % len(inputs)
				if k.BlobID(inputs[j]) != want[j] {
					errs <- errors.New("concurrent BlobID gave a different id")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestMasterKeys(t *testing.T) {
	t.Parallel()
	m := crypt.NewMasterKeys()
	if got := m.Tiers(); !slices.Equal(got, blob.Tiers) {
		t.Fatalf("Tiers = %v, want %v", got, blob.Tiers)
	}
	w, s := mustTier(t, m, blob.Workspace), mustTier(t, m, blob.Sensitive)
	if w.Tier != blob.Workspace || s.Tier != blob.Sensitive {
		t.Fatal("tier keys carry the wrong tier")
	}
	if w.Enc == s.Enc || w.IDKey == s.IDKey || w.Enc == w.IDKey {
		t.Fatal("tier keys are not independent")
	}
	if _, err := m.Tier(blob.Tier(3)); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("unknown tier: got %v, want ErrTierLocked", err)
	}

	ws, err := m.Restrict([]blob.Tier{blob.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	if !ws.Has(blob.Workspace) || ws.Has(blob.Sensitive) || !slices.Equal(ws.Tiers(), []blob.Tier{blob.Workspace}) {
		t.Fatalf("restricted set holds %v", ws.Tiers())
	}
	if _, err := ws.Tier(blob.Sensitive); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("got %v, want ErrTierLocked", err)
	}
	if _, err := ws.Restrict([]blob.Tier{blob.Workspace, blob.Sensitive}); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("widening a restricted set: got %v, want ErrTierLocked", err)
	}
	if _, err := m.Restrict(nil); err == nil {
		t.Fatal("Restrict to no tiers succeeded")
	}
}
