package config

import (
	"bufio"
	"fmt"
	"io"
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
