package config

func (d *decoder) workspaces(c *Config) {
	d.eachTable("workspaces", "workspace id", func(id string, path []string) {
		r := d.reader(path, workspaceKeys, tableHeader("workspaces", id))
		o := WorkspaceOverride{ID: id, ParkInterval: r.dur("park_interval"), PeriodicInterval: r.dur("periodic_interval")}
		// Show lists only the keys the workspace overrides.
		kept := r.table.lines[:0]
		for _, l := range r.table.lines {
			if r.given(l.key) {
				kept = append(kept, l)
			}
		}
		r.table.lines = kept
		d.unknownUnder(path, func(k string) string {
			return unknownKeyMsg(k, path, "a workspace override", workspaceKeys) + " (a workspace overrides only these keys of [lifecycle])"
		})
		c.Workspaces = append(c.Workspaces, o)
	})
}
