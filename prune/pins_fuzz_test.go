package prune

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
)

// FuzzLoadPins: pin objects come from storage and hold snapshots against
// forget and prune. Any bytes, sealed in either tier, either load as one
// valid pin, which encodes again to bytes that load to the same encoding,
// or are refused with an error naming the object; never a panic. A loaded
// pin holds exactly what it names: each of its snapshots (for any
// workspace, ids being unique), and every snapshot of its workspace when
// it holds all; nothing else.
func FuzzLoadPins(f *testing.F) {
	set := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	addStoredSeeds(f, []Pin{
		{Version: 1, Workspace: "bot-42", Owner: "store-1", Set: set, Snapshots: []PinnedSnapshot{{ID: blob.ID{1}, Why: "last good checkpoint of the lifecycle"}, {ID: blob.ID{2}}}},
		{Version: 1, Workspace: "w", All: true, AllWhy: "lost; an offer is open", Set: set},
		{Version: 1, Workspace: "w", Snapshots: []PinnedSnapshot{{ID: blob.ID{}}}},
		{Version: 2, Workspace: "w"},
		{Version: 1},
	})
	f.Add([]byte(`{"version":1,"workspace":"w","snapshots":[{"id":"zz"}]}`), false)
	other := blob.ID{0xee, 0xee}
	f.Fuzz(func(t *testing.T, data []byte, sensitive bool) {
		ctx := context.Background()
		ps, err := LoadPins(ctx, &fuzzObjects{fuzzTier(sensitive), data})
		if err != nil {
			if ps.Objects != nil || !strings.Contains(err.Error(), "pins/"+fuzzObjectID.String()) {
				t.Fatalf("LoadPins = %+v, %v; want nothing and an error naming the object", ps, err)
			}
			return
		}
		if len(ps.Objects) != 1 {
			t.Fatalf("%d pins from one object", len(ps.Objects))
		}
		p := ps.Objects[0]
		if sensitive || p.validate() != nil || p.ID != fuzzObjectID {
			t.Fatalf("accepted %+v from the %s tier", p, fuzzTier(sensitive))
		}
		var ids []blob.ID
		for _, s := range p.Snapshots {
			for _, ws := range []string{p.Workspace, p.Workspace + "-other"} {
				if _, held := ps.Held(ws, s.ID); !held {
					t.Fatalf("pinned snapshot %s not held for %q", s.ID.Short(), ws)
				}
			}
			if !slices.Contains(ids, s.ID) {
				ids = append(ids, s.ID)
			}
		}
		slices.SortFunc(ids, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
		if !slices.Equal(ps.Pinned(), ids) {
			t.Fatalf("Pinned = %v, want %v", ps.Pinned(), ids)
		}
		_, heldOther := ps.Held(p.Workspace, other)
		if heldOther != (p.All || slices.Contains(ids, other)) || slices.Equal(ps.HoldsAll(), []string{p.Workspace}) != p.All {
			t.Fatalf("pin %+v: an unnamed snapshot held %v, HoldsAll %v", p, heldOther, ps.HoldsAll())
		}
		if _, held := ps.Held(p.Workspace+"-other", other); held && !slices.Contains(ids, other) {
			t.Fatal("a pin holds a snapshot of another workspace that it does not name")
		}
		// Go decodes times it cannot encode (a +24:00 offset, a year
		// past 9999 in UTC): LoadPins refuses them.
		checkStoredReencodes(t, "pin", p.Set, p, func(enc []byte) (Pin, error) {
			again, err := LoadPins(ctx, &fuzzObjects{blob.Workspace, enc})
			if err != nil {
				return Pin{}, err
			}
			return again.Objects[0], nil
		})
	})
}
