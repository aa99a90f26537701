package config

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Show writes the effective configuration as TOML: every key with its
// value, defaults filled in, and as a trailing comment where the value
// came from (`# default`, `# FILE:LINE`, `# env NAME`, `# flag`). Secrets
// are never shown: secret keys are paths or variable names, no file is
// read and no variable's value is printed (for password_env, only whether
// the variable is set). The order is fixed: the sections as documented,
// hooks in file order, providers and workspaces by name.
func (c *Config) Show(w io.Writer) error {
	bw := bufio.NewWriter(w)
	from := "no config file"
	if c.file != "" {
		from = c.file
	}
	fmt.Fprintf(bw, "# lifeboat effective configuration (%s; precedence: flag > env > file > default)\n", from)
	for _, t := range c.show {
		bw.WriteString("\n")
		if t.header != "" {
			bw.WriteString(t.header + "\n")
		}
		if t.comment != "" {
			bw.WriteString(t.comment + "\n")
		}
		width := 0
		for _, l := range t.lines {
			width = max(width, len(l.text()))
		}
		for _, l := range t.lines {
			s := l.text()
			fmt.Fprintf(bw, "%s%s  # %s\n", s, strings.Repeat(" ", width-len(s)), l.note)
		}
	}
	return bw.Flush()
}

func (l showLine) text() string {
	if l.commented {
		return "# " + l.key + " (not set)"
	}
	return l.key + " = " + l.val
}

// showTable is one table of Show's output.
type showTable struct {
	header  string // "[server]"; "" for a comment-only entry
	comment string // a line of its own after the header
	lines   []showLine
}

type showLine struct {
	key, val, note string
	commented      bool // printed as a comment: the key has no value to show
}

// showValue formats a value as TOML: strings as they were given, numbers
// and lists from their typed value.
func showValue(s *spec, v *value, typed any) string {
	switch t := typed.(type) {
	case int:
		return strconv.Itoa(t)
	case []string:
		q := make([]string, len(t))
		for i, e := range t {
			q[i] = quote(e)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	if str, ok := v.raw.(string); ok {
		return quote(strings.TrimSpace(str))
	}
	if s.list() {
		return "[]"
	}
	return fmt.Sprint(v.raw)
}

// quote writes s as a TOML basic string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
