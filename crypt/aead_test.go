package crypt_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"lifeboat/crypt"
	"lifeboat/internal/seedtest"
)

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	s := crypt.NewSealer(crypt.NewRandomKey())
	for _, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 1000, 1 << 16, 1<<20 + 3} {
		plain := randBytes(r, n)
		aad := randBytes(r, r.IntN(40))
		sealed := s.Seal(nil, plain, aad)
		if len(sealed) != n+crypt.Overhead {
			t.Fatalf("n=%d: sealed length %d, want %d", n, len(sealed), n+crypt.Overhead)
		}
		got, err := s.Open(nil, sealed, aad)
		if err != nil {
			t.Fatalf("n=%d: Open: %v", n, err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("n=%d: round trip differs", n)
		}
	}
}

func TestSealOpenAppendToDst(t *testing.T) {
	t.Parallel()
	s := crypt.NewSealer(crypt.NewRandomKey())
	prefix := []byte("prefix:")
	plain := []byte("the plaintext")
	// A dst with spare capacity and one without must both keep the prefix.
	for _, dst := range [][]byte{append([]byte(nil), prefix...), append(make([]byte, 0, 200), prefix...)} {
		sealed := s.Seal(dst, plain, nil)
		if !bytes.HasPrefix(sealed, prefix) || len(sealed) != len(prefix)+len(plain)+crypt.Overhead {
			t.Fatalf("Seal did not append to dst: %q", sealed)
		}
		got, err := s.Open([]byte("out:"), sealed[len(prefix):], nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "out:the plaintext" {
			t.Fatalf("Open did not append to dst: %q", got)
		}
	}
}

func TestOpenWrongAAD(t *testing.T) {
	t.Parallel()
	s := crypt.NewSealer(crypt.NewRandomKey())
	sealed := s.Seal(nil, []byte("secret"), []byte("aad-1"))
	for _, aad := range [][]byte{nil, []byte("aad-2"), []byte("aad-1\x00"), []byte("aad-")} {
		if _, err := s.Open(nil, sealed, aad); !errors.Is(err, crypt.ErrAuth) {
			t.Errorf("aad %q: got %v, want ErrAuth", aad, err)
		}
	}
}

func TestOpenTruncatedAndExtended(t *testing.T) {
	t.Parallel()
	s := crypt.NewSealer(crypt.NewRandomKey())
	sealed := s.Seal(nil, []byte("a small message of some length"), []byte("ctx"))
	for n := 0; n < len(sealed); n++ {
		if got, err := s.Open(nil, sealed[:n], []byte("ctx")); !errors.Is(err, crypt.ErrAuth) || got != nil {
			t.Fatalf("truncated to %d: got %q, %v; want nil, ErrAuth", n, got, err)
		}
		if _, err := s.Open(nil, sealed[n+1:], []byte("ctx")); !errors.Is(err, crypt.ErrAuth) {
			t.Fatalf("first %d bytes cut: got %v, want ErrAuth", n+1, err)
		}
	}
	if _, err := s.Open(nil, append(bytes.Clone(sealed), 0), []byte("ctx")); !errors.Is(err, crypt.ErrAuth) {
		t.Fatalf("extended: got %v, want ErrAuth", err)
	}
}

func TestOpenBitFlips(t *testing.T) {
	t.Parallel()
	s := crypt.NewSealer(crypt.NewRandomKey())
	aad := []byte("ctx")
	sealed := s.Seal(nil, []byte("thirty-three bytes of plaintext!!"), aad)
	for i := range sealed {
		for bit := range 8 {
			damaged := bytes.Clone(sealed)
			damaged[i] ^= 1 << bit
			if got, err := s.Open(nil, damaged, aad); !errors.Is(err, crypt.ErrAuth) || got != nil {
				t.Fatalf("byte %d bit %d flipped: got %q, %v; want nil, ErrAuth", i, bit, got, err)
			}
		}
	}
}

func TestOpenWrongKey(t *testing.T) {
	t.Parallel()
	sealed := crypt.NewSealer(crypt.NewRandomKey()).Seal(nil, []byte("secret"), nil)
	if _, err := crypt.NewSealer(crypt.NewRandomKey()).Open(nil, sealed, nil); !errors.Is(err, crypt.ErrAuth) {
		t.Fatalf("got %v, want ErrAuth", err)
	}
}

func TestSealNoncesDiffer(t *testing.T) {
	t.Parallel()
	s := crypt.NewSealer(crypt.NewRandomKey())
	plain := []byte("same plaintext")
	a, b := s.Seal(nil, plain, nil), s.Seal(nil, plain, nil)
	const nonceSize = 24
	if bytes.Equal(a[:nonceSize], b[:nonceSize]) {
		t.Fatal("two Seals used the same nonce")
	}
	if bytes.Equal(a, b) {
		t.Fatal("two Seals of the same plaintext are identical")
	}
	if bytes.Contains(a, plain) {
		t.Fatal("sealed output contains the plaintext")
	}
}

func TestNewRandomKeyDiffers(t *testing.T) {
	t.Parallel()
	a, b := crypt.NewRandomKey(), crypt.NewRandomKey()
	if a == b {
		t.Fatal("two random keys are equal")
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	t.Parallel()
	k := fixedKey(0xa0)
	tk := crypt.NewTierKeys(1, k, fixedKey(0x10))
	hexKey := fmt.Sprintf("%x", [crypt.KeySize]byte(k))
	for _, f := range []string{"%v", "%+v", "%s", "%x", "%q"} {
		for _, v := range []any{k, tk, *crypt.NewMasterKeys()} {
			out := fmt.Sprintf(f, v)
			if strings.Contains(out, hexKey) || strings.Contains(out, "160 161 162") {
				t.Errorf("fmt %s of %T shows key bytes: %s", f, v, out)
			}
		}
	}
	if k.String() != "[redacted key]" {
		t.Errorf("Key.String = %q", k.String())
	}
}
