package snapshot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// A manifest sealed with the repository's key (a key holder wrote it, or
// a buggy writer) whose time Go decodes but cannot write back, or with
// bytes after its JSON object, does not load: it is damaged (repo.ErrCorrupt),
// named, and listed as such; `latest` does not pass over it silently.
func TestLoadManifestRefusesUnencodable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := snaptest.NewRepo(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good := r.SnapAt(t, "w", t0)
	enc, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	goodTime := []byte(`"` + t0.Format(time.RFC3339Nano) + `"`)
	if !bytes.Contains(enc, goodTime) {
		t.Fatalf("no %s in %s", goodTime, enc)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"offset +24:00", bytes.Replace(enc, goodTime, []byte(`"2026-01-01T10:00:00+24:00"`), 1), "cannot be written back"},
		{"year 10000 in UTC", bytes.Replace(enc, goodTime, []byte(`"9999-12-31T23:00:00-05:00"`), 1), "cannot be written back"},
		{"year -1 in UTC", bytes.Replace(enc, goodTime, []byte(`"0000-01-01T00:30:00+01:00"`), 1), "cannot be written back"},
		{"a second object", append(bytes.Clone(enc), ` {}`...), "after its JSON object"},
		{"trailing garbage", append(bytes.Clone(enc), "\nxyz"...), "after its JSON object"},
		{"a stray bracket", append(bytes.Clone(enc), `]`...), "after its JSON object"},
	} {
		id, err := r.SaveObject(ctx, crypt.KindSnapshot, blob.Workspace, c.b)
		if err != nil {
			t.Fatal(err)
		}
		m, err := snapshot.LoadManifest(ctx, r, id)
		var me *snapshot.ManifestError
		if m != nil || !errors.As(err, &me) || !errors.Is(err, repo.ErrCorrupt) || !strings.Contains(err.Error(), id.Short()) ||
			!strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: LoadManifest = %v, %v; want a ManifestError naming %s, corrupt, saying %q", c.name, m, err, id.Short(), c.want)
		}
		snaps, bad, err := snapshot.List(ctx, r, "w")
		if err != nil || len(snaps) != 1 || snaps[0].ID != good.ID || bad[id] == nil {
			t.Errorf("%s: List = %d snapshots, bad %v, %v", c.name, len(snaps), bad, err)
		}
		if _, _, err := snapshot.Resolve(ctx, r, id.String()[:12], "", snapshot.ResolveOptions{}); !errors.Is(err, repo.ErrCorrupt) {
			t.Errorf("%s: by id: %v", c.name, err)
		}
	}
	// Whitespace after the object is not data: such a manifest loads.
	id, err := r.SaveObject(ctx, crypt.KindSnapshot, blob.Workspace, append(bytes.Clone(enc), " \n\t"...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.LoadManifest(ctx, r, id); err != nil {
		t.Errorf("a manifest followed by whitespace: %v", err)
	}
}

// PrefixLookup finds a listed prefix by the raw path Walk gives, also
// when the manifest lists it escaped (a name that is not UTF-8).
func TestPrefixLookup(t *testing.T) {
	t.Parallel()
	m := &snapshot.Manifest{Prefixes: []snapshot.CapturePrefix{{Path: "logs/agent.log", Size: 3, FileSize: 5}, {Path: `logs/\xff.log`, Size: 1, FileSize: 2}}}
	l := m.PrefixLookup()
	for walk, want := range map[string]uint64{"logs/agent.log": 5, "logs/\xff.log": 2} {
		if p, ok := l.Find(walk); !ok || p.FileSize != want {
			t.Errorf("Find(%q) = %v, %v", walk, p, ok)
		}
	}
	for _, walk := range []string{"logs", "agent.log", "logs/\xfe.log"} {
		if _, ok := l.Find(walk); ok {
			t.Errorf("Find(%q) found a prefix", walk)
		}
	}
	if _, ok := (&snapshot.Manifest{}).PrefixLookup().Find("x"); ok {
		t.Error("found a prefix in a manifest without any")
	}
}
