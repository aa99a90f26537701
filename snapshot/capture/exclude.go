package capture

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrBadExclude: an exclude pattern is not a valid path.Match glob, or
// matches nothing (it is empty or only slashes). Nothing was captured; the
// CLI exits with the usage code 2.
var ErrBadExclude = errors.New("bad exclude pattern")

// capExcludes are Options.Excludes, compiled.
type capExcludes struct {
	base []string     // patterns without '/': match a base name
	full []capPattern // patterns with '/': match the path from the root
}

type capPattern struct {
	pat   string
	depth int // the number of path components it can match
}

func newCapExcludes(pats []string) (*capExcludes, error) {
	e := &capExcludes{}
	for _, orig := range pats {
		p := strings.TrimRight(strings.TrimLeft(orig, "/"), "/")
		if p == "" {
			return nil, fmt.Errorf("%w %q: it matches nothing; give a name or a path below the captured directory", ErrBadExclude, orig)
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("%w %q: %w (the syntax is Go's path.Match: * ? [a-z] [^a-z]; write \\[ for a literal [)", ErrBadExclude, orig, err)
		}
		if strings.Contains(p, "/") {
			e.full = append(e.full, capPattern{p, strings.Count(p, "/") + 1})
		} else {
			e.base = append(e.base, p)
		}
	}
	return e, nil
}

// filter drops the names of d that a pattern excludes.
func (e *capExcludes) filter(d *capDir, names []string) []string {
	if len(e.base) == 0 && len(e.full) == 0 {
		return names
	}
	var dir string // d's path, built only if a full pattern is as deep
	for _, p := range e.full {
		if p.depth == d.depth+1 {
			dir = string(d.relPath(""))
			break
		}
	}
	out := names[:0]
	for _, name := range names {
		if !e.match(d.depth+1, dir, name) {
			out = append(out, name)
		}
	}
	return out
}

func (e *capExcludes) match(depth int, dir, name string) bool {
	for _, p := range e.base {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	for _, p := range e.full {
		if p.depth != depth {
			continue
		}
		full := name
		if dir != "" {
			full = dir + "/" + name
		}
		if ok, _ := path.Match(p.pat, full); ok {
			return true
		}
	}
	return false
}
