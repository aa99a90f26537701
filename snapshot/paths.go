package snapshot

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// SplitPath turns a slash path from the snapshot root, as a user or a
// sensitive part gives it (a restore include, a sensitive tree's path),
// into names. Leading, trailing and doubled slashes and "." components are
// dropped (the user may write "/src/" or "./src"); ".." is refused, and
// every name must be a ValidName. An empty result means the root.
func SplitPath(inc string) ([]string, error) {
	var out []string
	for _, c := range strings.Split(inc, "/") {
		if c == "" || c == "." {
			continue
		}
		if err := ValidName([]byte(c)); err != nil {
			return nil, fmt.Errorf("include %q: %v", inc, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// JoinPath joins a validated name under a slash path from the snapshot
// root ("" is the root).
func JoinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// EscapePath renders a raw path for messages: valid UTF-8 as is, every
// other byte as \xNN (CaptureError.Path).
func EscapePath(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	var b strings.Builder
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size <= 1 {
			fmt.Fprintf(&b, `\x%02x`, p[0])
		} else {
			b.Write(p[:size])
		}
		p = p[size:]
	}
	return b.String()
}
