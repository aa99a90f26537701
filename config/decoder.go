package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
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

// reader reads the keys of one table.
type reader struct {
	d     *decoder
	path  []string
	keys  []spec
	table *showTable
	typed map[string]any
	set   map[string]bool
}

func (d *decoder) reader(path []string, keys []spec, header string) *reader {
	t := &showTable{header: header}
	d.show = append(d.show, t)
	return &reader{d: d, path: path, keys: keys, table: t, typed: map[string]any{}, set: map[string]bool{}}
}

// field reads key name once: the typed value (the default when unset; nil
// when unset without default or wrong), and records its Show line. A
// string of only spaces counts as unset. A required key that is unset is
// an error located at its table.
func (r *reader) field(name string) any {
	if t, ok := r.typed[name]; ok {
		return t
	}
	s := findSpec(r.keys, name)
	if s == nil {
		panic("config: no key " + name + " in " + displayKey(r.path))
	}
	path := join(r.path, name)
	id := pathID(path)
	v := r.d.vals[id]
	if v != nil {
		r.d.used[id] = true
		if str, ok := v.raw.(string); ok && strings.TrimSpace(str) == "" {
			v = nil
		}
	}
	r.checkShadowed(s, path)
	var typed any
	line := showLine{key: name}
	switch {
	case v != nil:
		var msg string
		if typed, msg = s.parse(v, true); msg != "" {
			r.d.fail(v.src, path, "%s", msg)
			typed = nil
		} else {
			r.set[name] = true
		}
		line.val, line.note = showValue(s, v, typed), v.src.String()
		if s.secret {
			line.note += " (a secret: its content is never shown)"
		}
	case s.def != "":
		typed, _ = s.parse(&value{raw: s.def, text: true}, false)
		line.val, line.note = showValue(s, &value{raw: s.def, text: true}, typed), "default"
	default:
		line.val, line.note = `""`, "default"
		if s.list() {
			line.val = "[]"
		}
		if s.required {
			r.d.fail(r.d.tableSource(r.path), path, "%s", r.missing(s))
			line.note = "missing"
		}
	}
	if v == nil && s.defNote != "" {
		line.note += ": " + s.defNote
	}
	if rep, ok := r.d.replaced[id]; ok && v == nil {
		line.note = fmt.Sprintf("not used: %s is set by %s (this was %s)", rep.by, rep.src, rep.was)
	}
	r.table.lines = append(r.table.lines, line)
	r.typed[name] = typed
	return typed
}

// checkShadowed reports values of path that a higher layer replaced but
// that are wrong all the same (a file is still checked when the
// environment or a flag overrides it). Files named are not opened.
func (r *reader) checkShadowed(s *spec, path []string) {
	id := pathID(path)
	by := ""
	if top := r.d.vals[id]; top != nil {
		by = top.src.String()
	} else if rep, ok := r.d.replaced[id]; ok {
		by = rep.src.String() + " (" + rep.by + ")"
	}
	for _, sv := range r.d.shadowed[id] {
		if str, ok := sv.raw.(string); ok && strings.TrimSpace(str) == "" {
			continue
		}
		if _, msg := s.parse(sv, false); msg != "" {
			r.d.fail(sv.src, path, "%s (replaced by %s, but wrong all the same)", msg, by)
		}
	}
}

func (r *reader) missing(s *spec) string {
	msg := "missing: this key is required"
	if r.path[0] == "providers" && s.name == "type" {
		msg += "; known types: " + strings.Join(providerTypes, ", ")
	}
	if len(r.path) == 1 {
		names := []string{envName(r.path[0], s.name)}
		names = append(names, s.aliases...)
		msg += fmt.Sprintf(" (set it in [%s], with the environment variable %s, or with --set %s.%s=...)",
			r.path[0], strings.Join(names, " or "), r.path[0], s.name)
	}
	return msg
}

func (r *reader) str(name string) string {
	s, _ := r.field(name).(string)
	return s
}

func (r *reader) dur(name string) time.Duration {
	d, _ := r.field(name).(time.Duration)
	return d
}

func (r *reader) int(name string) int {
	n, _ := r.field(name).(int)
	return n
}

func (r *reader) list(name string) []string {
	l, _ := r.field(name).([]string)
	return l
}

func (r *reader) float(name string) float64 {
	f, _ := r.field(name).(float64)
	return f
}

// src is where key name's value came from (the table when unset).
func (r *reader) src(name string) source {
	if v := r.d.vals[pathID(join(r.path, name))]; v != nil {
		return v.src
	}
	return r.d.tableSource(r.path)
}

// line returns the Show line of key name (read already).
func (r *reader) line(name string) *showLine {
	for i := range r.table.lines {
		if r.table.lines[i].key == name {
			return &r.table.lines[i]
		}
	}
	panic("config: " + name + " not read yet")
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

// given reports whether any layer gives key name a value (empty strings
// do not count), whether or not it parses.
func (r *reader) given(name string) bool {
	v := r.d.vals[pathID(join(r.path, name))]
	if v == nil {
		return false
	}
	s, isStr := v.raw.(string)
	return !isStr || strings.TrimSpace(s) != ""
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
