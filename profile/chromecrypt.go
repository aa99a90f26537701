package profile

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
)

// Chromium on Linux encrypts cookie values and saved passwords. With the
// "basic" password store (no keyring) the key is fixed and public, so such
// values ("v10") move between hosts; with a keyring ("v11") the key lives
// in the host's keyring and values do not decrypt elsewhere. See
// docs/profiles.md.

// v10Key is PBKDF2-HMAC-SHA1("peanuts", "saltysalt", 1 iteration, 16 bytes).
func v10Key() []byte {
	k, err := pbkdf2.Key(sha1.New, "peanuts", []byte("saltysalt"), 1, 16)
	if err != nil {
		panic(err) // fixed valid parameters
	}
	return k
}

var v10IV = bytes.Repeat([]byte{' '}, 16)

// encryptV10 encrypts plain as Chromium does with the basic store:
// "v10" || AES-128-CBC(key, IV of 16 spaces, PKCS#7 padded plain).
func encryptV10(plain []byte) []byte {
	blk, _ := aes.NewCipher(v10Key())
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	buf := append(append([]byte{}, plain...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	cipher.NewCBCEncrypter(blk, v10IV).CryptBlocks(buf, buf)
	return append([]byte("v10"), buf...)
}

// decryptV10 reverses encryptV10; v11 and unknown prefixes are refused.
func decryptV10(enc []byte) ([]byte, error) {
	ct, ok := bytes.CutPrefix(enc, []byte("v10"))
	if !ok {
		return nil, errors.New("not a v10 value (v11 values need the keyring of the host that wrote them)")
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return nil, errors.New("v10 value has a bad length")
	}
	blk, _ := aes.NewCipher(v10Key())
	buf := append([]byte{}, ct...)
	cipher.NewCBCDecrypter(blk, v10IV).CryptBlocks(buf, buf)
	pad := int(buf[len(buf)-1])
	if pad == 0 || pad > aes.BlockSize || pad > len(buf) {
		return nil, errors.New("v10 value has bad padding")
	}
	return buf[:len(buf)-pad], nil
}

// cookiePlain is what Chromium (cookie DB version 24 and later) encrypts
// for a cookie: SHA-256 of the host key, then the value.
func cookiePlain(host, value string) []byte {
	h := sha256.Sum256([]byte(host))
	return append(h[:], value...)
}
