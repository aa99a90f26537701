package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// manifestFuzzStore is an ObjectStore holding one snapshot object (the
// fuzzed bytes, sealed in tier) and keeping what SaveManifest saves.
type manifestFuzzStore struct {
	tier  blob.Tier
	data  []byte
	saved []byte
}

var manifestFuzzID = blob.ID{0x5e, 0xed}

func (s *manifestFuzzStore) SaveObject(_ context.Context, _ crypt.ObjectKind, _ blob.Tier, plaintext []byte) (blob.ID, error) {
	s.saved = bytes.Clone(plaintext)
	return manifestFuzzID, nil
}

func (s *manifestFuzzStore) LoadObject(context.Context, crypt.ObjectKind, blob.ID) (blob.Tier, []byte, error) {
	return s.tier, s.data, nil
}

func (s *manifestFuzzStore) ListObjects(_ context.Context, _ crypt.ObjectKind, fn func(blob.ID) error) error {
	return fn(manifestFuzzID)
}

// FuzzLoadManifest: snapshot manifests come from storage (authenticated,
// but written by any key holder and any lifeboat version). Any bytes,
// sealed in either tier, either load as a manifest that validates, which
// SaveManifest stores again as bytes that load to the same encoding, or
// are refused with an error naming the snapshot; List agrees; never a
// panic.
func FuzzLoadManifest(f *testing.F) {
	sub := blob.ID{1, 2, 3}
	good := []*Manifest{
		{Workspace: "bot-42", Time: time.Date(2026, 5, 1, 12, 0, 0, 123, time.UTC), Host: "vm", Instance: "i-1", Paths: []string{"/home/agent"},
			Tags: []string{"reason:park"}, Root: Node{Type: TypeDir, Mode: 0o755, MtimeNs: 1, Subtree: []blob.ID{sub}},
			Totals: Totals{Files: 3, Dirs: 1, Bytes: 100, NewBytes: 10}, Complete: true},
		{Workspace: "w", Parent: &sub, Sensitive: &sub, Root: Node{Name: []byte("x"), Type: TypeDir, Subtree: []blob.ID{sub, sub}},
			Errors: []CaptureError{{Path: "a/\\xff", Error: "permission denied"}}},
	}
	for _, m := range good {
		s := &manifestFuzzStore{}
		if _, err := SaveManifest(context.Background(), s, m); err != nil {
			f.Fatal(err)
		}
		f.Add(s.saved, false)
		f.Add(s.saved, true)
		f.Add(bytes.Replace(s.saved, []byte(`"version":1`), []byte(`"version":2`), 1), false)
		f.Add(bytes.Replace(s.saved, []byte(`"type":"dir"`), []byte(`"type":"file"`), 1), false)
		f.Add(bytes.Replace(s.saved, []byte(`"paths"`), []byte(`"unknown":1,"paths"`), 1), false)
		f.Add(append(bytes.Clone(s.saved), ` {}`...), false)
	}
	f.Add([]byte(`{"version":1,"workspace":"w","time":"2026-05-01T12:00:00+24:00","root":{"type":"dir","subtree":["`+strings.Repeat("00", 32)+`"]}}`), false)
	f.Add([]byte(`{"version":1,"workspace":"w","time":"9999-12-31T23:00:00-05:00","root":{"type":"dir","subtree":["`+strings.Repeat("00", 32)+`"]}}`), false)
	f.Add([]byte(`{"version":1,"workspace":"w","root":{"type":"dir","mode":4096,"subtree":["`+strings.Repeat("00", 32)+`"]}}`), false)
	f.Add([]byte(`{"version":1,"workspace":"w","root":{"type":"dir","subtree":["zz"]}}`), false)
	f.Add([]byte(`null`), false)
	f.Fuzz(func(t *testing.T, data []byte, sensitive bool) {
		ctx := context.Background()
		s := &manifestFuzzStore{tier: blob.Workspace, data: data}
		if sensitive {
			s.tier = blob.Sensitive
		}
		m, err := LoadManifest(ctx, s, manifestFuzzID)
		snaps, bad, lerr := List(ctx, s, "")
		if lerr != nil || len(snaps)+len(bad) != 1 || (err == nil) != (len(snaps) == 1) {
			t.Fatalf("List = %d snapshots, %d bad, %v; LoadManifest: %v", len(snaps), len(bad), lerr, err)
		}
		if err != nil {
			if m != nil || !strings.Contains(err.Error(), manifestFuzzID.Short()) {
				t.Fatalf("LoadManifest = %v, %v; want nil and an error naming the snapshot", m, err)
			}
			return
		}
		if sensitive || m.ID != manifestFuzzID || m.Validate() != nil {
			t.Fatalf("loaded manifest from tier %s: id %s, Validate %v", s.tier, m.ID.Short(), m.Validate())
		}
		// Go decodes times it cannot encode (a +24:00 offset, a year
		// past 9999 in UTC): LoadManifest refuses them, so what loads
		// encodes, also in UTC.
		if _, err := m.Time.UTC().MarshalJSON(); err != nil {
			t.Fatalf("a manifest whose time does not encode in UTC loads: %v", err)
		}
		enc, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("a loaded manifest does not encode: %v", err)
		}
		again := &manifestFuzzStore{tier: blob.Workspace}
		if _, err := SaveManifest(ctx, again, m); err != nil {
			t.Fatalf("a loaded manifest is not saved again: %v", err)
		}
		again.data = again.saved
		m2, err := LoadManifest(ctx, again, manifestFuzzID)
		if err != nil {
			t.Fatalf("a saved manifest does not load: %v\n%s", err, again.saved)
		}
		if enc2, _ := json.Marshal(m2); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ:\n%s\n%s", enc, enc2)
		}
	})
}
