package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// unknown reports every value no key of the schema took.
func (d *decoder) unknown() {
	for _, id := range slices.Sorted(maps.Keys(d.vals)) {
		if v := d.vals[id]; !d.used[id] {
			d.fail(v.src, v.path, "%s", unknownMsg(v.path))
		}
	}
}

func unknownMsg(path []string) string {
	k := path[len(path)-1]
	switch {
	case len(path) == 1:
		if alt, ok := secretAlternative(path); ok {
			return fmt.Sprintf("unknown key %q: secrets are given by %s, never inline", k, alt)
		}
		return fmt.Sprintf("unknown table or key %q at the top level; the tables are %s", k, "["+strings.Join(topLevel, "], [")+"]")
	case fixedSection(path[0]) != nil && len(path) == 2:
		return unknownKeyMsg(k, path[:1], "["+path[0]+"]", fixedSection(path[0]).keys)
	case path[0] == "quiesce" && len(path) == 2:
		return fmt.Sprintf("unknown key %q in [quiesce]: hooks are [[quiesce.hook]] tables", k)
	case path[0] == "quiesce" && len(path) == 4:
		return unknownKeyMsg(k, path[:3], "[[quiesce.hook]]", hookKeys)
	}
	return fmt.Sprintf("unknown key %q", displayKey(path))
}

// unknownKeyMsg says key is not one of keys of the table at path (what
// names the table for the user).
func unknownKeyMsg(key string, path []string, what string, keys []spec) string {
	if alt, ok := secretAlternative(join(path, key)); ok {
		return fmt.Sprintf("unknown key %q: secrets are given by %s, never inline", key, alt)
	}
	return fmt.Sprintf("unknown key %q in %s; its keys are %s", key, what, keyNames(keys))
}
