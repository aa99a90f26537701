package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Role is what a token may do. An operator may do everything a user may.
type Role int

const (
	RoleNone Role = iota
	RoleUser
	RoleOperator
)

func (r Role) String() string {
	switch r {
	case RoleUser:
		return "user"
	case RoleOperator:
		return "operator"
	}
	return "none"
}

// token is one line of the token file: the SHA-256 of a bearer token.
type token struct {
	hash  [sha256.Size]byte
	role  Role
	label string
}

// Tokens is the set of accepted bearer tokens, by hash.
type Tokens struct{ list []token }

// ErrBadTokenFile: the token file cannot be used.
var ErrBadTokenFile = errors.New("bad token file")

// LoadTokens reads a token file. Each line is
//
//	ROLE sha256:HEX [LABEL]
//
// where ROLE is user or operator, HEX is the SHA-256 of the token in 64
// hex digits (`printf %s "$TOKEN" | sha256sum`) and LABEL names the
// holder in logs and resolutions. Blank lines and lines starting with #
// are ignored. The file holds no token itself.
func LoadTokens(path string) (*Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrBadTokenFile, path, err)
	}
	return ParseTokens(path, b)
}

// ParseTokens parses the content of a token file (name is for errors).
func ParseTokens(name string, b []byte) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		bad := func(why string) error {
			return fmt.Errorf("%w %s line %d: %s; write lines as `user|operator sha256:<64 hex digits> [label]`", ErrBadTokenFile, name, n, why)
		}
		if len(f) < 2 || len(f) > 3 {
			return nil, bad("want a role, a hash and an optional label")
		}
		var tk token
		switch f[0] {
		case "user":
			tk.role = RoleUser
		case "operator":
			tk.role = RoleOperator
		default:
			return nil, bad(unknownRole(f[0]))
		}
		h, ok := strings.CutPrefix(f[1], "sha256:")
		raw, err := hex.DecodeString(h)
		if !ok || err != nil || len(raw) != sha256.Size {
			return nil, bad("the hash is not sha256: and 64 hex digits (the file holds hashes, never tokens)")
		}
		copy(tk.hash[:], raw)
		if prev, dup := seen[tk.hash]; dup {
			return nil, bad(fmt.Sprintf("the same token hash is already on line %d", prev))
		}
		seen[tk.hash] = n
		tk.label = fmt.Sprintf("%s@line%d", tk.role, n)
		if len(f) == 3 {
			tk.label = f[2]
		}
		t.list = append(t.list, tk)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrBadTokenFile, name, err)
	}
	if len(t.list) == 0 {
		return nil, fmt.Errorf("%w %s: no tokens; add a line `operator sha256:<hash of your token> [label]`", ErrBadTokenFile, name)
	}
	return t, nil
}

// unknownRole says a line's first word is no role. It names the word only
// when it looks like one (a short word such as "admin"): a token pasted
// into the file in the wrong place never reaches an error.
func unknownRole(word string) string {
	if len(word) <= 16 && strings.IndexFunc(word, func(c rune) bool { return (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') }) < 0 {
		return fmt.Sprintf("unknown role %q (want user or operator)", word)
	}
	return "unknown role: the first word is not user or operator (it is not shown: it may be a token)"
}

// HashToken returns the token file form of a token: "sha256:HEX".
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(h[:])
}

// match returns the role and label of the bearer token in r, or RoleNone.
// Every entry is compared, in constant time, whatever matched before.
func (t *Tokens) match(r *http.Request) (Role, string) {
	v := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return RoleNone, ""
	}
	h := sha256.Sum256([]byte(tok))
	role, label := RoleNone, ""
	for i := range t.list {
		if subtle.ConstantTimeCompare(h[:], t.list[i].hash[:]) == 1 {
			role, label = t.list[i].role, t.list[i].label
		}
	}
	return role, label
}
