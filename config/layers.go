package config

import (
	"fmt"
	"slices"
	"strings"
)

// envLayer reads the environment: one variable per scalar key of the fixed
// sections (LIFEBOAT_<SECTION>_<KEY>), the CLI's older names before them
// (so the full name wins when both are set), and LIFEBOAT_LOCAL_ROOT. An
// empty variable counts as unset.
func envLayer(lookup func(string) (string, bool)) []*value {
	if lookup == nil {
		return nil
	}
	var out []*value
	get := func(path []string, name string) {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			out = append(out, &value{path: path, raw: v, text: true, src: source{layer: fromEnv, env: name}})
		}
	}
	for _, sec := range fixedSections {
		for _, s := range sec.keys {
			if s.list() {
				continue
			}
			full := envName(sec.name, s.name)
			for _, alias := range s.aliases {
				if alias != full {
					get([]string{sec.name, s.name}, alias)
				}
			}
			get([]string{sec.name, s.name}, full)
		}
	}
	if root, ok := lookup(EnvLocalRoot); ok && strings.TrimSpace(root) != "" {
		src := source{layer: fromEnv, env: EnvLocalRoot}
		out = append(out,
			&value{path: []string{"providers", LocalRootProvider, "type"}, raw: TypeLocal, text: true, src: src},
			&value{path: []string{"providers", LocalRootProvider, "root"}, raw: root, text: true, src: src})
	}
	return out
}

// flagLayer reads KEY=VALUE overrides. KEY is a dotted key path:
// section.key, providers.NAME.key or workspaces.ID.key (NAME may hold
// dots: the key is after the last one). An empty VALUE resets the key to
// its default.
func flagLayer(sets []string) ([]*value, Errors) {
	var out []*value
	var errs Errors
	src := source{layer: fromFlag}
	for _, set := range sets {
		key, val, ok := strings.Cut(set, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			errs = append(errs, src.errAt(set, "want KEY=VALUE, such as server.listen=127.0.0.1:9000"))
			continue
		}
		path, msg := flagPath(key)
		if msg != "" {
			errs = append(errs, src.errAt(key, msg))
			continue
		}
		out = append(out, &value{path: path, raw: val, text: true, src: src})
	}
	return out, errs
}

func flagPath(key string) ([]string, string) {
	sec, rest, dotted := strings.Cut(key, ".")
	switch {
	case sec == "quiesce":
		return nil, "quiesce hooks are set in the config file only"
	case sec == "providers" || sec == "workspaces":
		i := strings.LastIndexByte(rest, '.')
		if i <= 0 || i == len(rest)-1 {
			return nil, fmt.Sprintf("want %s.NAME.KEY=VALUE", sec)
		}
		return []string{sec, rest[:i], rest[i+1:]}, ""
	case !dotted:
		if fixedSection(sec) != nil {
			return nil, fmt.Sprintf("[%s] is a table: want %s.KEY=VALUE", sec, sec)
		}
		return []string{sec}, ""
	}
	return []string{sec, rest}, ""
}

// replacement records a value dropped because a higher layer gave its
// alternative (password_file and password_env are one choice).
type replacement struct {
	by  string // the alternative key
	src source // where the alternative came from
	was source // where the dropped value came from
}

// alternatives are keys of which one is used: a higher layer that sets
// one replaces the other from a lower layer. Set in the same layer, both
// are an error.
var alternatives = [][2]string{{"password_file", "password_env"}}

// merge applies the layers in order, each value replacing the one at its
// path from an earlier layer. The values replaced are returned too, by
// path: they are still checked for their type.
func merge(layers ...[]*value) (values, map[string]replacement, map[string][]*value) {
	m := values{}
	replaced := map[string]replacement{}
	shadowed := map[string][]*value{}
	for _, layer := range layers {
		for _, v := range layer {
			if o := m[pathID(v.path)]; o != nil {
				shadowed[pathID(v.path)] = append(shadowed[pathID(v.path)], o)
			}
			m[pathID(v.path)] = v
			delete(replaced, pathID(v.path))
			if s, ok := v.raw.(string); ok && strings.TrimSpace(s) == "" {
				continue
			}
			for _, alt := range alternatives {
				if len(v.path) != 2 || v.path[0] != "repository" || !slices.Contains(alt[:], v.path[1]) {
					continue
				}
				other := alt[0]
				if other == v.path[1] {
					other = alt[1]
				}
				oid := pathID([]string{"repository", other})
				if o := m[oid]; o != nil && o.src.layer < v.src.layer {
					delete(m, oid)
					shadowed[oid] = append(shadowed[oid], o)
					replaced[oid] = replacement{by: v.path[1], src: v.src, was: o.src}
				}
			}
		}
	}
	return m, replaced, shadowed
}
