package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// A key file whose creation time Go decodes but cannot write back (here
// an offset of +24:00, written into keys/ by anyone who can write there)
// is not a key file: `key list` (also --json, which could not print it)
// marks it with the reason, the real key still opens, and `key remove`
// removes it.
func TestKeyFileUnencodableTimeCLI(t *testing.T) {
	e := newEnv(t)
	e.init()
	names := e.keyFileNames()
	real, err := os.ReadFile(filepath.Join(e.repo, "keys", names[0]))
	must(t, err)
	var kf crypt.KeyFile
	must(t, json.Unmarshal(real, &kf))
	data, err := json.Marshal(kf)
	must(t, err)
	created, _ := kf.Created.MarshalJSON()
	data = bytes.Replace(data, created, []byte(`"2026-01-02T03:04:05+24:00"`), 1)
	forged := blob.ID(blake3.Sum256(data)).String()
	must(t, os.WriteFile(filepath.Join(e.repo, "keys", forged), data, 0o600))

	r := e.ok("key", "list", "--json")
	var found bool
	for _, m := range jsonLines(t, r.stdout) {
		if m["id"] == forged {
			found = true
			if msg, _ := m["error"].(string); !strings.Contains(msg, "cannot be written back") || m["current"] != false {
				t.Fatalf("the forged key file's line: %v", m)
			}
		} else if m["error"] != nil || m["current"] != true {
			t.Fatalf("the real key file's line: %v", m)
		}
	}
	if !found {
		t.Fatalf("key list --json does not list the forged key file:\n%s", r.stdout)
	}
	if r := e.ok("key", "list"); !strings.Contains(r.stdout, forged[:8]) || !strings.Contains(r.stdout, "cannot be written back") {
		t.Fatalf("key list does not mark the forged key file:\n%s", r.stdout)
	}
	e.ok("key", "remove", forged[:8])
	if got := e.keyFileNames(); len(got) != 1 || got[0] != names[0] {
		t.Fatalf("key files after removing the forged one: %v", got)
	}
}
