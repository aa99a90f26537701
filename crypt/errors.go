package crypt

import "errors"

var (
	// ErrWrongPassword: no key file opened with the given password.
	ErrWrongPassword = errors.New("wrong password: no key in this repository opens with it")
	// ErrNotKeyFile: the bytes are not a Lifeboat key file.
	ErrNotKeyFile = errors.New("not a lifeboat key file")
	// ErrAuth: ciphertext failed authentication (corrupt, truncated, tampered or swapped).
	ErrAuth = errors.New("authentication failed: data is corrupt, truncated or was tampered with")
	// ErrTierLocked: the key in use does not hold that tier's keys.
	ErrTierLocked = errors.New("the key in use does not unlock this tier")
)
