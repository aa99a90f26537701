package prune

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// addStoredSeeds adds, for each of objs, its JSON as a seed read from
// either tier and followed by a second document; then two seeds with a
// set time out of range.
func addStoredSeeds[T any](f *testing.F, objs []T) {
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
		f.Add(append(bytes.Clone(b), ` {}`...), false)
	}
	f.Add([]byte(`{"version":1,"workspace":"w","set":"2026-03-01T10:00:00+24:00"}`), false)
	f.Add([]byte(`{"version":1,"workspace":"w","set":"9999-12-31T23:00:00-05:00"}`), false)
}

// checkStoredReencodes fails unless loaded, a what that loaded from
// storage with the set time set, encodes again (its time in UTC too) to
// bytes that reload accepts and whose result encodes the same.
func checkStoredReencodes[T any](t *testing.T, what string, set time.Time, loaded T, reload func(enc []byte) (T, error)) {
	t.Helper()
	if _, err := set.UTC().MarshalJSON(); err != nil {
		t.Fatalf("a %s whose time does not encode in UTC loads: %v", what, err)
	}
	enc, err := json.Marshal(loaded)
	if err != nil {
		t.Fatalf("a loaded %s does not encode: %v", what, err)
	}
	again, err := reload(enc)
	if err != nil {
		t.Fatalf("a loaded %s, encoded again, is refused: %v\n%s", what, err, enc)
	}
	if enc2, _ := json.Marshal(again); !bytes.Equal(enc, enc2) {
		t.Fatalf("encodings differ:\n%s\n%s", enc, enc2)
	}
}

// fuzzObjects is an Objects holding one sealed object of every kind: the
// fuzzed bytes, sealed in tier.
type fuzzObjects struct {
	tier blob.Tier
	data []byte
}

var fuzzObjectID = blob.ID{0xf0, 0x22}

func (o *fuzzObjects) SaveObject(context.Context, crypt.ObjectKind, blob.Tier, []byte) (blob.ID, error) {
	return blob.ID{}, nil
}

func (o *fuzzObjects) LoadObject(context.Context, crypt.ObjectKind, blob.ID) (blob.Tier, []byte, error) {
	return o.tier, o.data, nil
}

func (o *fuzzObjects) ListObjects(_ context.Context, _ crypt.ObjectKind, fn func(blob.ID) error) error {
	return fn(fuzzObjectID)
}

func (o *fuzzObjects) RemoveObject(context.Context, crypt.ObjectKind, blob.ID) error { return nil }

func fuzzTier(sensitive bool) blob.Tier {
	if sensitive {
		return blob.Sensitive
	}
	return blob.Workspace
}

// FuzzPolicies: retention policy objects come from storage and decide
// what forget deletes. Any bytes, sealed in either tier, either load as
// one valid policy of a named workspace, which encodes again to bytes that
// load to the same encoding, or are refused with an error naming the
// object; never a panic. Whatever a loaded policy says, Apply decides on
// every snapshot, gives each kept one a reason and none to the others,
// and keeps the newest complete snapshot (RuleLastGoodRoot).
func FuzzPolicies(f *testing.F) {
	set := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	addStoredSeeds(f, []StoredPolicy{
		{Version: 1, Workspace: "bot-42", Set: set, Policy: Policy{Last: 3, Within: 72 * time.Hour, Hourly: 2, Daily: 7, Weekly: 4, Monthly: 12, Tags: []string{"keep"}}},
		{Version: 1, Workspace: "w", Set: set},
		{Version: 1, Workspace: "w", Policy: Policy{Last: 1 << 62, Within: 1<<63 - 1}},
		{Version: 1, Workspace: "w", Policy: Policy{Daily: -1}},
		{Version: 2, Workspace: "w"},
		{Version: 1},
	})
	f.Add([]byte(`{"version":1,"workspace":"w","keep_last":1,"keep_forever":true}`), false)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var snaps []Snapshot
	for i := range 6 {
		snaps = append(snaps, Snapshot{ID: blob.ID{byte(i + 1)}, Workspace: "w", Time: now.Add(-time.Duration(i*i) * 7 * time.Hour),
			Complete: i != 0 && i != 3, Tags: [][]string{nil, {"keep"}, nil, {"x", "keep"}, nil, {}}[i]})
	}
	f.Fuzz(func(t *testing.T, data []byte, sensitive bool) {
		ctx := context.Background()
		ps, err := Policies(ctx, &fuzzObjects{fuzzTier(sensitive), data})
		if err != nil {
			if ps != nil || !strings.Contains(err.Error(), "policies/"+fuzzObjectID.String()) {
				t.Fatalf("Policies = %v, %v; want nil and an error naming the object", ps, err)
			}
			return
		}
		if len(ps) != 1 {
			t.Fatalf("%d policies from one object", len(ps))
		}
		var p StoredPolicy
		for ws, sp := range ps {
			if ws != sp.Workspace {
				t.Fatalf("policy of %q filed under %q", sp.Workspace, ws)
			}
			p = sp
		}
		if sensitive || p.Version != 1 || p.Workspace == "" || p.Validate() != nil || p.ID != fuzzObjectID {
			t.Fatalf("accepted %+v from the %s tier", p, fuzzTier(sensitive))
		}
		_ = p.String()
		res := Apply(p.Policy, p.Workspace, snaps, now)
		if len(res.Decisions) != len(snaps) {
			t.Fatalf("%d decisions for %d snapshots", len(res.Decisions), len(snaps))
		}
		newestGood := true
		for _, d := range res.Decisions { // newest first
			if d.Keep != (len(d.Reasons) > 0) {
				t.Fatalf("decision %+v: keep and reasons disagree", d)
			}
			if d.Snapshot.Complete && newestGood {
				newestGood = false
				if !d.Keep || !slices.Contains(d.Reasons, RuleLastGoodRoot) {
					t.Fatalf("policy %s does not keep the newest complete snapshot: %+v", p.Policy, d)
				}
			}
		}
		// Go decodes times it cannot encode (a +24:00 offset, a year
		// past 9999 in UTC): Policies refuses them.
		checkStoredReencodes(t, "policy", p.Set, p, func(enc []byte) (StoredPolicy, error) {
			again, err := Policies(ctx, &fuzzObjects{blob.Workspace, enc})
			return again[p.Workspace], err
		})
	})
}
