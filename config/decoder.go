package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// decoder checks the merged values against the schema and builds the
// typed Config, collecting every error and the lines Show prints.
type decoder struct {
	file     string            // the config file; "" when there is none
	vals     values            // merged layers
	tables   map[string]source // tables the file defines
	replaced map[string]replacement
	shadowed map[string][]*value // values a higher layer replaced
	used     map[string]bool     // values a key of the schema took
	errs     Errors
	show     []*showTable
}

func (d *decoder) fail(src source, path []string, format string, args ...any) {
	d.errs = append(d.errs, src.errAt(displayKey(path), fmt.Sprintf(format, args...)))
}

// tableSource is where a table is defined: its header in the file, or
// the first value under it from the environment or a flag.
func (d *decoder) tableSource(path []string) source {
	if s, ok := d.tables[pathID(path)]; ok {
		return s
	}
	for _, id := range slices.Sorted(maps.Keys(d.vals)) {
		if v := d.vals[id]; hasPrefix(v.path, path) {
			return v.src
		}
	}
	if d.file != "" {
		return source{layer: fromFile, file: d.file}
	}
	return source{}
}

// present reports whether the file has the table, or any layer sets a key
// under it.
func (d *decoder) present(path []string) bool {
	if _, ok := d.tables[pathID(path)]; ok {
		return true
	}
	for _, v := range d.vals {
		if hasPrefix(v.path, path) {
			return true
		}
	}
	return false
}

// eachTable calls fn, in name order, for each named table under top whose
// name is valid, with the table's path. A table with another name is
// refused as a bad what ("workspace id") and its keys are marked used.
func (d *decoder) eachTable(top, what string, fn func(name string, path []string)) {
	for _, name := range d.names(top) {
		path := []string{top, name}
		if !validName(name) {
			d.fail(d.tableSource(path), path, "bad %s %q: want %s", what, name, nameRule)
			d.markUsed(path)
			continue
		}
		fn(name, path)
	}
}

// names lists the named tables under top (providers, workspaces) that any
// layer defines, sorted.
func (d *decoder) names(top string) []string {
	set := map[string]bool{}
	for id := range d.tables {
		if p := strings.Split(id, "\x00"); len(p) == 2 && p[0] == top {
			set[p[1]] = true
		}
	}
	for _, v := range d.vals {
		if len(v.path) == 3 && v.path[0] == top {
			set[v.path[1]] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// unknownUnder reports every value under path that no key took.
func (d *decoder) unknownUnder(path []string, msg func(key string) string) {
	for _, id := range slices.Sorted(maps.Keys(d.vals)) {
		v := d.vals[id]
		if !d.used[id] && hasPrefix(v.path, path) && len(v.path) > len(path) {
			d.used[id] = true
			d.fail(v.src, v.path, "%s", msg(v.path[len(path)]))
		}
	}
}

func hasPrefix(p, prefix []string) bool {
	return len(p) >= len(prefix) && slices.Equal(p[:len(prefix)], prefix)
}

// markUsed takes every value under path without a check (its table is
// already reported as bad).
func (d *decoder) markUsed(path []string) {
	for id, v := range d.vals {
		if hasPrefix(v.path, path) {
			d.used[id] = true
		}
	}
}
