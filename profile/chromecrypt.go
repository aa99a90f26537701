package profile

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
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

// decryptV10 reverses Chromium's v10 encryption; v11 and unknown prefixes are refused.
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
