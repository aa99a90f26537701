package crypt

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// KeySize is the size of every symmetric key.
const KeySize = 32

// Overhead is the number of bytes Seal adds: nonce plus tag.
const Overhead = chacha20poly1305.NonceSizeX + chacha20poly1305.Overhead

// Key is a 32-byte symmetric key. Its String never shows the bytes.
type Key [KeySize]byte

func (Key) String() string { return "[redacted key]" }

// GoString keeps %#v from printing the bytes.
func (Key) GoString() string { return "[redacted key]" }

// MarshalJSON refuses: key bytes never go into JSON output or logs.
func (Key) MarshalJSON() ([]byte, error) { return nil, errors.New("refusing to marshal a key") }

// NewRandomKey returns a key from the system's secure random source.
func NewRandomKey() Key {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // crypto/rand.Read never fails on Linux
	}
	return k
}

// Sealer encrypts and authenticates with XChaCha20-Poly1305 and random nonces.
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns a Sealer for key.
func NewSealer(key Key) *Sealer {
	a, err := chacha20poly1305.NewX(key[:])
	if err != nil {
		panic(err) // only for a wrong key size, which the Key type rules out
	}
	return &Sealer{aead: a}
}

// Seal appends nonce || ciphertext || tag to dst and returns it.
func (s *Sealer) Seal(dst, plaintext, aad []byte) []byte {
	n := len(dst)
	dst = growTo(dst, n+Overhead+len(plaintext))
	nonce := dst[n : n+chacha20poly1305.NonceSizeX]
	if _, err := rand.Read(nonce); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return s.aead.Seal(dst[:n+len(nonce)], nonce, plaintext, aad)
}

// Open checks and decrypts a Seal output, appending the plaintext to dst.
// Any damage, truncation or wrong additional data yields ErrAuth.
func (s *Sealer) Open(dst, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < Overhead {
		return nil, fmt.Errorf("%w (sealed data is %d bytes, shorter than the %d-byte overhead)", ErrAuth, len(sealed), Overhead)
	}
	nonce := sealed[:chacha20poly1305.NonceSizeX]
	out, err := s.aead.Open(dst, nonce, sealed[len(nonce):], aad)
	if err != nil {
		return nil, ErrAuth
	}
	return out, nil
}

// OpenInPlace is Open that decrypts over sealed itself: the plaintext it
// returns lies in sealed's memory, after the nonce. sealed no longer holds
// the sealed bytes afterwards, whether or not it opened.
func (s *Sealer) OpenInPlace(sealed, aad []byte) ([]byte, error) {
	n := min(len(sealed), chacha20poly1305.NonceSizeX)
	return s.Open(sealed[n:n], sealed, aad)
}

// growTo returns b with length n, reusing its capacity when it can.
func growTo(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n)
	copy(nb, b)
	return nb
}
