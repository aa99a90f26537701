package crypt

import (
	"errors"
	"testing"

	"lifeboat/blob"
)

type oneEntryCache struct{ name, value []byte }

func (c *oneEntryCache) Get(name string) []byte {
	if name == string(c.name) {
		return c.value
	}
	return nil
}
func (c *oneEntryCache) Put(name string, v []byte) { c.name, c.value = []byte(name), v }
func (c *oneEntryCache) Secret() []byte            { return nil }

// An entry sealed under the right password but holding another key does
// not open the key file: the derivation decides, and replaces it.
func TestKEKCacheWrongKeyInEntry(t *testing.T) {
	p := NewKDFParams(1, 64, 1)
	data, err := NewKeyFile(NewMasterKeys(), blob.Tiers, []byte("pw"), p, blob.ID{1}, KeyFileMeta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kf, err := DecodeKeyFile(data)
	if err != nil {
		t.Fatal(err)
	}
	c := &oneEntryCache{}
	keepKEK(c, p, []byte("pw"), Key{7})
	forged := c.value
	if _, ok := kf.OpenFromCache([]byte("pw"), blob.ID{1}, c); ok {
		t.Fatal("an entry holding another key opened the key file")
	}
	if _, err := kf.OpenCached([]byte("pw"), blob.ID{1}, c); err != nil {
		t.Fatal(err)
	}
	if string(c.value) == string(forged) {
		t.Fatal("the entry holding another key was not replaced after the derivation")
	}
	if _, ok := kf.OpenFromCache([]byte("pw"), blob.ID{1}, c); !ok {
		t.Fatal("the replaced entry does not open the key file")
	}
	if _, err := kf.OpenCached([]byte("wrong"), blob.ID{1}, c); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong password: %v", err)
	}
}
