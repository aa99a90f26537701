package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in the configuration. File and Line locate a value
// from the config file; for a value from the environment File is
// "environment NAME", for a --set override it is "flag --set", and Line
// is 0. Key is the dotted key ("providers.box1.port",
// "quiesce.hook[0].name"); Msg says what is wrong and what is wanted.
type Error struct {
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
	Key  string `json:"key"`
	Msg  string `json:"message"`
}

const (
	flagFile  = "flag --set"
	envPrefix = "environment "
)

// Error formats the error as `FILE:LINE: KEY: MSG`,
// `environment NAME: KEY: MSG` or `flag --set KEY: MSG`.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File == flagFile:
		b.WriteString(flagFile)
		if e.Key != "" {
			b.WriteString(" " + e.Key)
		}
		b.WriteString(": ")
		b.WriteString(e.Msg)
		return b.String()
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors are all the problems found, in order: the config file by line,
// then the environment, then flags, then problems with no single source.
type Errors []*Error

// Error is one error per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.As and errors.Is each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func (es Errors) sort(file string) {
	rank := func(e *Error) int {
		switch {
		case e.File == file && file != "":
			return 0
		case strings.HasPrefix(e.File, envPrefix):
			return 1
		case e.File == flagFile:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
}
