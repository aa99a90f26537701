package snapshot

import "lifeboat/blob"

// tier is the tier a capture saves contents and trees in.
func (o *CaptureOptions) tier() blob.Tier {
	if o.Tier == 0 {
		return blob.Workspace
	}
	return o.Tier
}

// filter drops the names of d that CaptureOptions.Filter rejects. Dropped
// entries are not stat'ed, read or listed: nothing of them is captured.
func (c *capturer) filter(d *capDir, names []string) []string {
	if c.o.Filter == nil {
		return names
	}
	dir := string(d.relPath(""))
	out := names[:0]
	for _, name := range names {
		rel := name
		if dir != "" {
			rel = dir + "/" + name
		}
		if c.o.Filter(rel) {
			out = append(out, name)
		}
	}
	return out
}
