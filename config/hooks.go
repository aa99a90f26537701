package config

import (
	"strconv"
)

// hooks reads the [[quiesce.hook]] tables in file order.
func (d *decoder) hooks(c *Config) {
	seen := map[string]source{}
	for i := 0; ; i++ {
		path := []string{"quiesce", "hook", strconv.Itoa(i)}
		if _, ok := d.tables[pathID(path)]; !ok {
			return
		}
		r := d.reader(path, hookKeys, "[[quiesce.hook]]")
		h := Hook{
			Name:       r.str("name"),
			Pause:      r.list("pause"),
			Resume:     r.list("resume"),
			Timeout:    r.dur("timeout"),
			Workspaces: r.list("workspaces"),
		}
		if h.Name != "" {
			if first, dup := seen[h.Name]; dup {
				d.fail(r.src("name"), join(path, "name"), "duplicate hook name %q (first at %s): hook names are unique", h.Name, first)
			}
			seen[h.Name] = r.src("name")
		}
		if r.set["workspaces"] {
			if len(h.Workspaces) == 0 {
				d.fail(r.src("workspaces"), join(path, "workspaces"), "empty list: leave workspaces out to run the hook in every workspace")
			}
			for _, w := range h.Workspaces {
				if !validName(w) {
					d.fail(r.src("workspaces"), join(path, "workspaces"), "bad workspace id %q: want %s", w, nameRule)
				}
			}
		}
		if !r.given("workspaces") {
			l := r.line("workspaces")
			l.commented, l.val = true, ""
		}
		c.Hooks = append(c.Hooks, h)
	}
}
