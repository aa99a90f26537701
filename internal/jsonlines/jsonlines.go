// Package jsonlines is the --json output the binaries share: one JSON
// object a line, each with a message_type.
package jsonlines

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
)

// Requested spots --json among a command line's arguments before its
// flags are parsed, so that errors met while parsing them come out as JSON
// too. Nothing after "--" counts.
func Requested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// Parse decodes output of one object a line, each of which must have a
// string message_type.
func Parse(s string) ([]map[string]any, error) {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		m := map[string]any{}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return out, fmt.Errorf("not JSON: %q: %w", sc.Text(), err)
		}
		if _, ok := m["message_type"].(string); !ok {
			return out, fmt.Errorf("no message_type in %q", sc.Text())
		}
		out = append(out, m)
	}
	return out, sc.Err()
}
