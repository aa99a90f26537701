package backendtest

import (
	"testing"

	"lifeboat/backend"
)

// testTempSave: a backend that streams packs from temp files
// (backend.TempSaver) stores what was written, in chunks, under the
// handle; a discarded temp file leaves nothing; saving the same pack again
// from a new temp file succeeds.
func testTempSave(t *testing.T, b backend.Backend) {
	ts, ok := b.(backend.TempSaver)
	if !ok {
		t.Skip("the backend does not take temp files")
	}
	g := newGen(15)
	h, data := g.handle(backend.Pack), g.data(3<<20+5)
	write := func() backend.TempFile {
		f, err := ts.CreateTemp()
		if err != nil {
			t.Fatalf("CreateTemp: %v", err)
		}
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 100_000)
			if _, err := f.Write(rest[:n]); err != nil {
				t.Fatalf("writing a temp file: %v", err)
			}
			rest = rest[n:]
		}
		return f
	}
	if err := ts.SaveTemp(t.Context(), h, write()); err != nil {
		t.Fatalf("SaveTemp %s: %v", h, err)
	}
	wantLoad(t, b, h, data)
	if err := ts.SaveTemp(t.Context(), h, write()); err != nil {
		t.Fatalf("SaveTemp of the same pack again: %v", err)
	}
	ts.DiscardTemp(write())
	if got := listAll(t, b, backend.Pack); len(got) != 1 || got[h.Name] != int64(len(data)) {
		t.Errorf("List after SaveTemp and DiscardTemp: %v, want only %s", got, h.Name)
	}
}
