package prune

import (
	"strings"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// A policy object sealed with the repository's key whose time Go decodes
// but cannot write back, or with bytes after its JSON object, does not
// load: Policies fails naming it and why (forget must not run on a policy
// it cannot read), and a good policy of another workspace is not blamed.
func TestPolicyUnencodableRefused(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		plain []byte
		want  string
	}{
		"offset +24:00":     {[]byte(`{"version":1,"workspace":"w","set":"2026-03-10T12:00:00+24:00","keep_last":1}`), "cannot be written back"},
		"year 10000 in UTC": {[]byte(`{"version":1,"workspace":"w","set":"9999-12-31T23:00:00-05:00","keep_last":1}`), "cannot be written back"},
		"year -1 in UTC":    {[]byte(`{"version":1,"workspace":"w","set":"0000-01-01T00:30:00+01:00","keep_last":1}`), "cannot be written back"},
		"a second object":   {[]byte(`{"version":1,"workspace":"w","set":"2026-03-10T12:00:00Z","keep_last":1} {}`), "after the policy's JSON object"},
		"trailing garbage":  {[]byte(`{"version":1,"workspace":"w","set":"2026-03-10T12:00:00Z","keep_last":1}x`), "after the policy's JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			r := e.open(nil)
			good, err := SetPolicy(t.Context(), r, "v", Policy{Last: 2}, t0)
			if err != nil {
				t.Fatal(err)
			}
			id, err := r.SaveObject(t.Context(), crypt.KindPolicy, blob.Workspace, c.plain)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := Policies(t.Context(), r)
			if ps != nil || err == nil || !strings.Contains(err.Error(), "policies/"+id.String()) || !strings.Contains(err.Error(), c.want) ||
				strings.Contains(err.Error(), good.ID.String()) {
				t.Fatalf("Policies with a bad policy: %v, %v", ps, err)
			}
		})
	}
}
