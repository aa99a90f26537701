package harness

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// docs/json.md's `bench` section names every field of the bench report's
// JSON: the report's own, a target's, a stage ceiling's and a stage's.
func TestBenchJSONDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "### `bench_step` and `bench`")
	if start < 0 {
		t.Fatal("docs/json.md has no bench section")
	}
	sec := doc[start+1:]
	if end := strings.Index(sec, "\n### "); end >= 0 {
		sec = sec[:end]
	}
	for _, v := range []any{Report{}, Target{}, Ceiling{}, StageTime{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			if !strings.Contains(sec, "`"+tag+"`") {
				t.Errorf("docs/json.md's bench section does not name %s's field `%s`", typ.Name(), tag)
			}
		}
	}
	// The first-capture target is checked against the stage ceiling, with
	// or without restic.
	if strings.Contains(sec, "`[]` when restic did not run") {
		t.Errorf("docs/json.md says targets are empty without restic; the stage ceiling's target is not")
	}
}
