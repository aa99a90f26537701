package providers

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxNameLen bounds instance ids that adapters use as file names, well below
// NAME_MAX (255), so names derived from them (staging, checkpoints) fit.
const MaxNameLen = 128

// ValidName reports whether s is safe as a single path component on any
// host: letters, digits, '.', '_' and '-', not starting with '.', at most
// MaxNameLen bytes. Adapters that keep instances as directories (local,
// ssh) accept only such ids, so no id can name anything outside their root
// ("..", "a/b", "/etc", a NUL) or collide with their dot-named metadata.
func ValidName(s string) bool {
	if s == "" || len(s) > MaxNameLen || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// KeyedName derives a ValidName from an idempotency key, for adapters that
// name instances after the key so a retried create finds the same one
// without any stored record ("ws-" and 32 hex digits of SHA-256).
func KeyedName(key string) string {
	sum := sha256.Sum256([]byte("lifeboat instance\x00" + key))
	return "ws-" + hex.EncodeToString(sum[:16])
}
