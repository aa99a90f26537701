package crypt_test

import (
	"bytes"
	"errors"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/seedtest"
)

// TestObjectHeaderLayout pins the 6-byte plaintext header of sealed objects
// and the numeric kinds: both are part of repository format v1.
func TestObjectHeaderLayout(t *testing.T) {
	t.Parallel()
	if crypt.ObjectHeaderSize != 6 {
		t.Fatalf("ObjectHeaderSize = %d", crypt.ObjectHeaderSize)
	}
	kinds := map[crypt.ObjectKind]byte{crypt.KindConfig: 1, crypt.KindIndex: 2, crypt.KindSnapshot: 3, crypt.KindLock: 4,
		crypt.KindPolicy: 5, crypt.KindPin: 6}
	names := map[crypt.ObjectKind]string{crypt.KindConfig: "config", crypt.KindIndex: "index", crypt.KindSnapshot: "snapshot",
		crypt.KindLock: "lock", crypt.KindPolicy: "policy", crypt.KindPin: "pin"}
	for kind, name := range names {
		if kind.String() != name {
			t.Errorf("kind %d is called %q, want %q", uint8(kind), kind, name)
		}
	}
	m := crypt.NewMasterKeys()
	for _, tier := range blob.Tiers {
		for kind, b := range kinds {
			obj := crypt.SealObject(mustTier(t, m, tier), kind, []byte("payload"))
			want := []byte{'L', 'B', 'O', 1, byte(tier), b}
			if !bytes.Equal(obj[:6], want) {
				t.Errorf("%s %s: header % x, want % x", tier, kind, obj[:6], want)
			}
			if len(obj) != 6+crypt.Overhead+len("payload") {
				t.Errorf("%s %s: %d bytes", tier, kind, len(obj))
			}
			gt, gk, err := crypt.ObjectTier(obj)
			if err != nil || gt != tier || gk != kind {
				t.Errorf("ObjectTier = %s, %s, %v", gt, gk, err)
			}
		}
	}
	if crypt.Overhead != 40 {
		t.Fatalf("Overhead = %d, want 24-byte nonce + 16-byte tag", crypt.Overhead)
	}
}

func TestObjectRoundTrip(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	m := crypt.NewMasterKeys()
	for _, tier := range blob.Tiers {
		for _, n := range []int{0, 1, 1000, 100_000} {
			plain := randBytes(r, n)
			obj := crypt.SealObject(mustTier(t, m, tier), crypt.KindIndex, plain)
			gt, got, err := crypt.OpenObject(m, crypt.KindIndex, obj)
			if err != nil || gt != tier || !bytes.Equal(got, plain) {
				t.Fatalf("%s, %d bytes: tier %s, err %v, equal %v", tier, n, gt, err, bytes.Equal(got, plain))
			}
		}
	}
}

func TestObjectTampering(t *testing.T) {
	t.Parallel()
	m := crypt.NewMasterKeys()
	ws, err := m.Restrict([]blob.Tier{blob.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	obj := crypt.SealObject(mustTier(t, m, blob.Workspace), crypt.KindSnapshot, []byte("a snapshot"))
	sens := crypt.SealObject(mustTier(t, m, blob.Sensitive), crypt.KindSnapshot, []byte("a snapshot"))
	edit := func(src []byte, i int, b byte) []byte {
		c := bytes.Clone(src)
		c[i] = b
		return c
	}

	// Asking for another kind is refused before decrypting.
	if _, _, err := crypt.OpenObject(m, crypt.KindIndex, obj); err == nil {
		t.Error("opened a snapshot as an index")
	}
	// Relabelling the kind is caught by the additional data.
	if _, _, err := crypt.OpenObject(m, crypt.KindIndex, edit(obj, 5, byte(crypt.KindIndex))); !errors.Is(err, crypt.ErrAuth) {
		t.Errorf("kind swapped: got %v, want ErrAuth", err)
	}
	// Relabelling the tier: with both tiers it fails authentication...
	if _, _, err := crypt.OpenObject(m, crypt.KindSnapshot, edit(obj, 4, byte(blob.Sensitive))); !errors.Is(err, crypt.ErrAuth) {
		t.Errorf("tier flipped to sensitive: got %v, want ErrAuth", err)
	}
	if _, _, err := crypt.OpenObject(m, crypt.KindSnapshot, edit(sens, 4, byte(blob.Workspace))); !errors.Is(err, crypt.ErrAuth) {
		t.Errorf("tier flipped to workspace: got %v, want ErrAuth", err)
	}
	// ...without the sensitive tier it is locked, and it never opens.
	if _, _, err := crypt.OpenObject(ws, crypt.KindSnapshot, edit(obj, 4, byte(blob.Sensitive))); !errors.Is(err, crypt.ErrTierLocked) {
		t.Errorf("tier flipped, workspace-only key: got %v, want ErrTierLocked", err)
	}
	if tier, _, err := crypt.OpenObject(ws, crypt.KindSnapshot, sens); !errors.Is(err, crypt.ErrTierLocked) || tier != blob.Sensitive {
		t.Errorf("sensitive object, workspace-only key: got %s, %v; want sensitive, ErrTierLocked", tier, err)
	}
	for name, bad := range map[string][]byte{
		"tier 0":      edit(obj, 4, 0),
		"tier 3":      edit(obj, 4, 3),
		"version 2":   edit(obj, 3, 2),
		"version 0":   edit(obj, 3, 0),
		"magic":       edit(obj, 0, 'X'),
		"kind 0":      edit(obj, 5, 0),
		"payload bit": edit(obj, len(obj)-20, obj[len(obj)-20]^1),
		"nonce bit":   edit(obj, 6, obj[6]^1),
	} {
		if _, got, err := crypt.OpenObject(m, crypt.KindSnapshot, bad); err == nil || got != nil {
			t.Errorf("%s: got %q, %v; want an error", name, got, err)
		}
	}
	for n := range len(obj) {
		if _, got, err := crypt.OpenObject(m, crypt.KindSnapshot, obj[:n]); err == nil || got != nil {
			t.Fatalf("truncated to %d bytes: got %q, %v", n, got, err)
		}
		if _, _, err := crypt.ObjectTier(obj[:min(n, crypt.ObjectHeaderSize+crypt.Overhead-1)]); err == nil {
			t.Fatalf("ObjectTier accepted %d bytes", n)
		}
	}
	if _, _, err := crypt.OpenObject(m, crypt.KindSnapshot, append(bytes.Clone(obj), 0)); !errors.Is(err, crypt.ErrAuth) {
		t.Errorf("extended: got %v, want ErrAuth", err)
	}
}
