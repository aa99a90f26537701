package crypt

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"lifeboat/blob"
)

// Editing a key file's public metadata makes it fail to open.
func TestKeyFileMetadataBound(t *testing.T) {
	t.Parallel()
	m := NewMasterKeys()
	var repo blob.ID
	meta := KeyFileMeta{Created: time.Now(), Hostname: "host", Username: "user"}
	data, err := NewKeyFile(m, blob.Tiers, []byte("pw"), NewKDFParams(1, 64, 1), repo, meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	for field, val := range map[string]any{"hostname": "evil", "username": "root2", "created": "2001-01-01T00:00:00Z"} {
		var raw map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		raw[field] = val
		edited, _ := json.Marshal(raw)
		kf, err := DecodeKeyFile(edited)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kf.Open([]byte("pw"), repo); !errors.Is(err, ErrWrongPassword) {
			t.Errorf("edited %s: %v, want a failed open", field, err)
		}
	}
	kf, _ := DecodeKeyFile(data)
	if _, err := kf.Open([]byte("pw"), repo); err != nil {
		t.Fatalf("unedited key file: %v", err)
	}
}
