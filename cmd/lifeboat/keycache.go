package main

import (
	"fmt"
	"os"
	"time"

	"lifeboat/crypt"
	"lifeboat/internal/keyring"
	"lifeboat/repo"
)

// keyCacheEnv is the environment variable --key-cache defaults to.
const keyCacheEnv = "LIFEBOAT_KEY_CACHE"

// keyCacheDefault is how long the user's kernel keyring keeps a key
// derived from a password (--key-cache): commands run within it of each
// other skip the argon2id derivation, about 0.1 s and 48 MiB each.
const keyCacheDefault = 10 * time.Minute

// checkKeyCache refuses a --key-cache (or LIFEBOAT_KEY_CACHE) beyond
// what the kernel keyring can time (a usage error).
func (g *globalOptions) checkKeyCache() error {
	if g.keyCacheTTL > keyring.MaxTTL {
		return usageError{fmt.Sprintf("--key-cache %s (or %s) is too long: at most %s, or 0 to keep no key", g.keyCacheTTL, keyCacheEnv, keyring.MaxTTL)}
	}
	return nil
}

// kekCache is the cache the repository is opened or created with: the
// user's kernel keyring, unless --key-cache is 0 or the password came
// from somewhere the same user cannot read it again. A typed password is
// a person's, perhaps used elsewhere too, and an entry sealed under it
// could be attacked at hashing speed; so could one from a pipe or a
// FIFO, stored nowhere. One from a regular file or the environment any
// process of the same user can read anyway (docs/keys.md, "The key
// cache"). A cache that cannot be opened (its secret file) is none.
func (g *globalOptions) kekCache() crypt.KEKCache {
	if g.keyCacheTTL == 0 || g.prompted || !g.passwordStored() {
		return nil
	}
	dir := g.cacheDir
	if dir == "" {
		dir = repo.DefaultCacheDir()
	}
	c, err := keyring.Open(g.keyCacheTTL, dir)
	if err != nil {
		return nil
	}
	return c
}

// passwordStored says whether the password comes from the environment
// or from a regular file, where the same user can read it again.
func (g *globalOptions) passwordStored() bool {
	file := g.passwordFile
	if file == "" && g.cfg != nil {
		file = g.cfg.Repository.PasswordFile
	}
	if file == "" {
		return true // LIFEBOAT_PASSWORD, or the config's password_env
	}
	fi, err := os.Stat(file)
	return err == nil && fi.Mode().IsRegular()
}
