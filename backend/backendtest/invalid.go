package backendtest

import (
	"strings"
	"testing"

	"lifeboat/backend"
)

// InvalidHandles are names no backend may accept; they include path
// escapes, so backends can reuse them in their own tests.
var InvalidHandles = []backend.Handle{
	{Type: backend.Pack, Name: "../x"},
	{Type: backend.Pack, Name: "../../../../tmp/ab"},
	{Type: backend.Pack, Name: "ab/../../cd"},
	{Type: backend.Pack, Name: ".."},
	{Type: backend.Pack, Name: "."},
	{Type: backend.Key, Name: ""},
	{Type: backend.Key, Name: "a"},
	{Type: backend.Key, Name: "AB"},
	{Type: backend.Index, Name: "ab/cd"},
	{Type: backend.Index, Name: "/etc/passwd"},
	{Type: backend.Index, Name: "ab\x00cd"},
	{Type: backend.Snapshot, Name: "ab cd"},
	{Type: backend.Lock, Name: strings.Repeat("a", 129)},
	{Type: backend.Config, Name: "../config"},
	{Type: backend.Config, Name: "other"},
	{Type: "../x", Name: "ab"},
	{Type: "", Name: "ab"},
	{Type: "tmp", Name: "ab"},
}

func testInvalid(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	data := []byte("hostile")
	for _, h := range InvalidHandles {
		if err := b.Save(ctx, h, data); err == nil {
			t.Errorf("Save %q/%q: no error", h.Type, h.Name)
		}
		if _, err := b.Load(ctx, h, 0, 0); err == nil {
			t.Errorf("Load %q/%q: no error", h.Type, h.Name)
		}
		if _, err := b.Stat(ctx, h); err == nil {
			t.Errorf("Stat %q/%q: no error", h.Type, h.Name)
		}
		if err := b.Remove(ctx, h); err == nil {
			t.Errorf("Remove %q/%q: no error", h.Type, h.Name)
		}
	}
	for _, ft := range backend.FileTypes {
		if got := listAll(t, b, ft); len(got) != 0 {
			t.Errorf("List %s after refused saves: %v", ft, got)
		}
	}
}
