package snapshot

import (
	"bytes"
	"testing"
	"time"
)

// FuzzDecodeCatalogRecord: a catalog record either does not decode or is
// exactly the encoding of what it decodes to (one encoding per record);
// nothing panics.
func FuzzDecodeCatalogRecord(f *testing.F) {
	for _, m := range []*Manifest{
		{Workspace: "w", Time: time.Date(2026, 12, 6, 0, 0, 0, 123, time.UTC), Complete: true},
		{Workspace: "a-much-longer.workspace_id", Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Workspace: "x", Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Complete: true},
	} {
		f.Add(encodeCatalogRecord(m))
	}
	f.Add([]byte{catalogRecordVersion, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := decodeCatalogRecord(b)
		if !ok {
			return
		}
		again := encodeCatalogRecord(&Manifest{Workspace: r.workspace, Time: r.time, Complete: r.complete})
		if !bytes.Equal(again, b) {
			t.Fatalf("record %x decodes to %+v, which encodes as %x", b, r, again)
		}
	})
}
