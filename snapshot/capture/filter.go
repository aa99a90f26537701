package capture

import (
	"slices"
	"strings"

	"lifeboat/blob"
)

// tier is the tier a capture saves contents and trees in.
func (o *Options) tier() blob.Tier {
	if o.Tier == 0 {
		return blob.Workspace
	}
	return o.Tier
}

// filter drops the names of d that Options.Filter rejects, and the given
// sensitive subtrees the workspace tree leaves out (treeRole.omit).
// Dropped entries are not stat'ed, read or listed: nothing of them is
// captured.
func (c *capturer) filter(d *capDir, names []string) []string {
	if c.o.Filter == nil && len(c.t.omit) == 0 {
		return names
	}
	dir := string(d.relPath(""))
	var omit []string // names of d to leave out
	for _, p := range c.t.omit {
		if i := strings.LastIndexByte(p, '/'); i < 0 && dir == "" || i >= 0 && p[:i] == dir {
			omit = append(omit, p[i+1:])
		}
	}
	if c.o.Filter == nil && len(omit) == 0 {
		return names // no slash path built per entry
	}
	out := names[:0]
	for _, name := range names {
		if slices.Contains(omit, name) {
			continue
		}
		if c.o.Filter != nil {
			rel := name
			if dir != "" {
				rel = dir + "/" + name
			}
			if !c.o.Filter(rel) {
				continue
			}
		}
		out = append(out, name)
	}
	return out
}
