package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// fileLayer is what the config file holds.
type fileLayer struct {
	vals   []*value
	tables map[string]source // the tables the file defines, by pathID
	errs   Errors
}

// readFile reads and decodes the config file. go-toml reports syntax
// errors (with their position) and TOML's own rules (a key defined twice);
// the key paths are flattened here and checked against the schema later.
func readFile(path string) (*fileLayer, Errors) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, Errors{{File: path, Msg: fmt.Sprintf("cannot read the config file: %v", unwrapPath(err))}}
	}
	var m map[string]any
	if err := toml.Unmarshal(doc, &m); err != nil {
		e := &Error{File: path, Msg: strings.TrimPrefix(err.Error(), "toml: ")}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			e.Line, _ = de.Position()
			e.Key = strings.Join(de.Key(), ".")
		}
		return nil, Errors{e}
	}
	f := &fileLayer{tables: map[string]source{}}
	fl := flattener{f: f, file: path, lines: scanLines(doc)}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fl.top(k, m[k])
	}
	return f, f.errs
}

type flattener struct {
	f     *fileLayer
	file  string
	lines lines
}

func (fl *flattener) src(path []string) source {
	return source{layer: fromFile, file: fl.file, line: fl.lines.line(path)}
}

func (fl *flattener) add(path []string, raw any) {
	fl.f.vals = append(fl.f.vals, &value{path: path, raw: raw, src: fl.src(path)})
}

func (fl *flattener) table(path []string, raw any, want string) (map[string]any, bool) {
	t, ok := raw.(map[string]any)
	if !ok {
		fl.f.errs = append(fl.f.errs, fl.src(path).errAt(displayKey(path), "want "+want+", got "+describe(raw)))
		return nil, false
	}
	fl.f.tables[pathID(path)] = fl.src(path)
	return t, true
}

// top flattens one top-level key into key paths: section.key,
// quiesce.hook.N.key, providers.NAME.key and workspaces.ID.key. Keys
// outside these shapes become values the schema does not know, reported
// as unknown keys.
func (fl *flattener) top(k string, raw any) {
	path := []string{k}
	switch {
	case fixedSection(k) != nil:
		t, ok := fl.table(path, raw, "a table ["+k+"]")
		for _, kk := range sortedKeys(t, ok) {
			fl.add(join(path, kk), t[kk])
		}
	case k == "quiesce":
		t, ok := fl.table(path, raw, "a table: write hooks as [[quiesce.hook]]")
		for _, kk := range sortedKeys(t, ok) {
			if kk != "hook" {
				fl.add(join(path, kk), t[kk])
				continue
			}
			hooks, isArray := t[kk].([]any)
			if !isArray {
				hp := join(path, kk)
				fl.f.errs = append(fl.f.errs, fl.src(hp).errAt(displayKey(hp), "want [[quiesce.hook]] tables, got "+describe(t[kk])))
				continue
			}
			for i, h := range hooks {
				hp := join(path, kk, strconv.Itoa(i))
				ht, ok := fl.table(hp, h, "a [[quiesce.hook]] table")
				for _, hk := range sortedKeys(ht, ok) {
					fl.add(join(hp, hk), ht[hk])
				}
			}
		}
	case k == "providers" || k == "workspaces":
		t, ok := fl.table(path, raw, "a table of named tables ["+k+".NAME]")
		for _, name := range sortedKeys(t, ok) {
			np := join(path, name)
			nt, ok := fl.table(np, t[name], "a table ["+k+"."+name+"]")
			for _, nk := range sortedKeys(nt, ok) {
				fl.add(join(np, nk), nt[nk])
			}
		}
	default:
		fl.add(path, raw)
	}
}

func sortedKeys(t map[string]any, ok bool) []string {
	if !ok {
		return nil
	}
	return slices.Sorted(maps.Keys(t))
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
