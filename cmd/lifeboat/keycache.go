package main

import (
	"time"

	"lifeboat/crypt"
	"lifeboat/internal/keyring"
)

// keyCacheEnv is the environment variable --key-cache defaults to.
const keyCacheEnv = "LIFEBOAT_KEY_CACHE"

// keyCacheDefault is how long the user's kernel keyring keeps a key
// derived from a password (--key-cache): commands run within it of each
// other skip the argon2id derivation, about 0.1 s and 48 MiB each.
const keyCacheDefault = 10 * time.Minute

// kekCache is the cache the repository is opened or created with: the
// user's kernel keyring, unless --key-cache is 0 or the password was
// typed at a prompt. A typed password is a person's, perhaps used
// elsewhere too, and an entry sealed under it could be attacked at
// hashing speed; one from a file or the environment any process of the
// same user can read anyway (docs/keys.md, "The key cache").
func (g *globalOptions) kekCache() crypt.KEKCache {
	if g.keyCacheTTL == 0 || g.prompted {
		return nil
	}
	return keyring.New(g.keyCacheTTL)
}
