// Package jsonlinestest decodes the binaries' --json output in their tests.
package jsonlinestest

import (
	"testing"

	"lifeboat/internal/jsonlines"
)

// Parse decodes --json output (jsonlines.Parse), failing t on a line that
// is not a JSON object.
func Parse(t testing.TB, s string) []map[string]any {
	t.Helper()
	out, err := jsonlines.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
