package config

import (
	"fmt"
	"strings"
)

// Layers in precedence order: a later layer's value replaces an earlier one's.
const (
	fromDefault = iota
	fromFile
	fromEnv
	fromFlag
)

// source is where a value came from.
type source struct {
	layer int
	file  string // fromFile
	line  int    // fromFile; 0 when unknown
	env   string // fromEnv: the variable's name
}

// String is the trailing comment Show prints.
func (s source) String() string {
	switch s.layer {
	case fromFile:
		if s.line > 0 {
			return fmt.Sprintf("%s:%d", s.file, s.line)
		}
		return s.file
	case fromEnv:
		return "env " + s.env
	case fromFlag:
		return "flag"
	}
	return "default"
}

// errAt is an Error for key, located at s.
func (s source) errAt(key, msg string) *Error {
	switch s.layer {
	case fromFile:
		return &Error{File: s.file, Line: s.line, Key: key, Msg: msg}
	case fromEnv:
		return &Error{File: envPrefix + s.env, Key: key, Msg: msg}
	case fromFlag:
		return &Error{File: flagFile, Key: key, Msg: msg}
	}
	return &Error{Key: key, Msg: msg}
}

// value is one key's value from one layer. From the file, raw is what
// go-toml decoded (string, int64, float64, bool, []any, map[string]any,
// dates); from the environment or a flag, raw is a string of text that is
// parsed according to the key's kind.
type value struct {
	path []string
	raw  any
	text bool
	src  source
}

// values are the merged layers, by pathID.
type values map[string]*value

// pathID is a map key for a key path (names may hold dots).
func pathID(p []string) string { return strings.Join(p, "\x00") }

// displayKey is a path as errors and docs write it: dotted, with hooks
// indexed ("quiesce.hook[0].name").
func displayKey(p []string) string {
	if len(p) >= 3 && p[0] == "quiesce" && p[1] == "hook" {
		s := "quiesce.hook[" + p[2] + "]"
		if len(p) > 3 {
			s += "." + strings.Join(p[3:], ".")
		}
		return s
	}
	return strings.Join(p, ".")
}

func join(p []string, more ...string) []string {
	out := make([]string, 0, len(p)+len(more))
	return append(append(out, p...), more...)
}
