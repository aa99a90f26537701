package config

import (
	"strconv"

	"github.com/pelletier/go-toml/v2/unstable"
)

// lines maps key paths (pathID) to the line of the file that defines them:
// a key's own line, or a table's header line. [[array]] tables get their
// index as a path element, counted from 0 as go-toml decodes them.
type lines map[string]int

// scanLines walks the document with go-toml's unstable parser to find the
// line of every key and table. The document has already been decoded, so
// it parses; a parser error only ends the walk early.
func scanLines(doc []byte) lines {
	ln := lines{}
	var p unstable.Parser
	p.Reset(doc)
	var cur []string
	arrays := map[string]int{} // array table path -> elements so far
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, first := keyParts(e.Key())
			cur = ln.resolveArrays(parts, arrays)
			if e.Kind == unstable.ArrayTable {
				id := pathID(cur)
				cur = append(cur, strconv.Itoa(arrays[id]))
				arrays[id]++
			}
			ln.add(cur, lineOf(&p, first))
		case unstable.KeyValue:
			ln.keyValue(&p, cur, e)
		}
	}
	return ln
}

// resolveArrays puts the current element's index after every prefix of
// parts that is an array of tables ([a.b] after [[a]] is in a's last element).
func (ln lines) resolveArrays(parts []string, arrays map[string]int) []string {
	var out []string
	for _, part := range parts {
		out = append(out, part)
		if n, ok := arrays[pathID(out)]; ok && n > 0 && len(out) < len(parts) {
			out = append(out, strconv.Itoa(n-1))
		}
	}
	return out
}

// add records path at line, and each implicit parent table not yet seen.
func (ln lines) add(path []string, line int) {
	for i := 1; i <= len(path); i++ {
		id := pathID(path[:i])
		if _, ok := ln[id]; !ok || i == len(path) {
			ln[id] = line
		}
	}
}

func (ln lines) keyValue(p *unstable.Parser, table []string, kv *unstable.Node) {
	parts, first := keyParts(kv.Key())
	path := join(table, parts...)
	ln.add(path, lineOf(p, first))
	ln.value(p, path, kv.Value())
}

// value descends into inline tables and arrays of inline tables.
func (ln lines) value(p *unstable.Parser, path []string, v *unstable.Node) {
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			ln.keyValue(p, path, it.Node())
		}
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			if n := it.Node(); n.Kind == unstable.InlineTable {
				el := join(path, strconv.Itoa(i))
				if c := n.Child(); c != nil {
					if _, first := keyParts(c.Key()); first != nil {
						ln[pathID(el)] = lineOf(p, first)
					}
				}
				ln.value(p, el, n)
			}
		}
	}
}

func keyParts(it unstable.Iterator) (parts []string, first *unstable.Node) {
	for it.Next() {
		n := it.Node()
		if first == nil {
			first = n
		}
		parts = append(parts, string(n.Data))
	}
	return parts, first
}

func lineOf(p *unstable.Parser, n *unstable.Node) int {
	if n == nil {
		return 0
	}
	return p.Shape(n.Raw).Start.Line
}

// line is the line of path, or of its nearest ancestor the file has.
func (ln lines) line(path []string) int {
	for i := len(path); i > 0; i-- {
		if l, ok := ln[pathID(path[:i])]; ok {
			return l
		}
	}
	return 0
}
