package config

import (
	"fmt"
	"strings"
	"time"
)

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
	at := r.d.tableSource(r.path) // where a missing required key is reported
	if v != nil {
		r.d.used[id] = true
		if str, ok := v.raw.(string); ok && strings.TrimSpace(str) == "" {
			at, v = v.src, nil
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
			r.d.fail(at, path, "%s", r.missing(s))
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

// noteEnv adds to the Show line of key, which names the environment
// variable name, whether that variable is set; never its value. An empty
// name adds nothing.
func (r *reader) noteEnv(c *Config, key, name string) {
	if name == "" {
		return
	}
	state := "is not set"
	if v, ok := c.lookup(name); ok && v != "" {
		state = "is set"
	}
	r.line(key).note += "; " + name + " " + state + " (its value is never shown)"
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
