package snapshot

import (
	"strings"
	"testing"
)

// FuzzDecodeSensitivePart: the sensitive part comes from storage; any bytes
// either decode into a part whose paths are clean and disjoint, or are
// refused, never a panic.
func FuzzDecodeSensitivePart(f *testing.F) {
	f.Add([]byte(`{"version":1,"salt":"AAAAAAAAAAAAAAAAAAAAAA==","trees":[{"path":"a/b","kind":"chromium","root":{"name":null,"type":"dir","mode":448,"uid":0,"gid":0,"mtime_ns":0,"subtree":["` + strings.Repeat("ab", 32) + `"]},"totals":{"files":1,"dirs":1,"bytes":1,"new_bytes":1},"complete":true}]}`))
	f.Add([]byte(`{"version":1,"trees":[{"path":"../x","root":{"type":"dir"}}]}`))
	f.Add([]byte(`{"version":1,"trees":[{"path":"a","root":{"type":"dir","subtree":["` + strings.Repeat("00", 32) + `"]}},{"path":"a/b","root":{"type":"dir","subtree":["` + strings.Repeat("00", 32) + `"]}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeSensitivePart(b)
		if err != nil {
			return
		}
		for i, a := range p.Trees {
			comps, err := SplitPath(a.Path)
			if err != nil || len(comps) == 0 || strings.Join(comps, "/") != a.Path {
				t.Fatalf("accepted unclean path %q", a.Path)
			}
			for j, b := range p.Trees {
				if i != j && (a.Path == b.Path || strings.HasPrefix(b.Path, a.Path+"/")) {
					t.Fatalf("accepted overlapping paths %q %q", a.Path, b.Path)
				}
			}
		}
	})
}
