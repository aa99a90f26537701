package backendtest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"

	"lifeboat/backend"
)

// Run runs the conformance suite. newBackend must return an empty backend
// each call; Run closes it when the subtest ends.
func Run(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	open := func(t *testing.T) backend.Backend {
		t.Helper()
		b := newBackend(t)
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return b
	}
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open(t)) })
	t.Run("ConfigAlias", func(t *testing.T) { testConfigAlias(t, open(t)) })
	t.Run("Ranges", func(t *testing.T) { testRanges(t, open(t)) })
	t.Run("EmptyFileRanges", func(t *testing.T) { testEmptyRanges(t, open(t)) })
	t.Run("LoadRange", func(t *testing.T) { testLoadRange(t, open(t)) })
	t.Run("Missing", func(t *testing.T) { testMissing(t, open(t)) })
	t.Run("List", func(t *testing.T) { testList(t, open(t)) })
	t.Run("ListEmpty", func(t *testing.T) { testListEmpty(t, open(t)) })
	t.Run("ListStops", func(t *testing.T) { testListStops(t, open(t)) })
	t.Run("Overwrite", func(t *testing.T) { testOverwrite(t, open(t)) })
	t.Run("ConfigOnce", func(t *testing.T) { testConfigOnce(t, open(t)) })
	t.Run("OverwriteConcurrent", func(t *testing.T) { testOverwriteConcurrent(t, open(t)) })
	t.Run("Remove", func(t *testing.T) { testRemove(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("TempSave", func(t *testing.T) { testTempSave(t, open(t)) })
	t.Run("Canceled", func(t *testing.T) { testCanceled(t, open(t)) })
	t.Run("InvalidHandles", func(t *testing.T) { testInvalid(t, open(t)) })
	t.Run("FailedSaveLeavesNothing", func(t *testing.T) { testFailedSave(t, open(t)) })
}

// gen makes deterministic test data and names.
type gen struct{ r *rand.Rand }

func newGen(seed uint64) *gen { return &gen{rand.New(rand.NewPCG(seed, 0x6c6966))} }

func (g *gen) data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

// name returns a random 64-char lowercase hex name.
func (g *gen) name() string { return hex.EncodeToString(g.data(32)) }

func (g *gen) handle(t backend.FileType) backend.Handle {
	if t == backend.Config {
		return backend.Handle{Type: t, Name: "config"}
	}
	return backend.Handle{Type: t, Name: g.name()}
}

func save(t testing.TB, b backend.Backend, h backend.Handle, data []byte) {
	t.Helper()
	if err := b.Save(t.Context(), h, data); err != nil {
		t.Fatalf("Save %s (%d bytes): %v", h, len(data), err)
	}
}

// wantLoad checks that the whole file h holds want.
func wantLoad(t testing.TB, b backend.Backend, h backend.Handle, want []byte) {
	t.Helper()
	got, err := b.Load(t.Context(), h, 0, 0)
	if err != nil {
		t.Fatalf("Load %s: %v", h, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Load %s: got %d bytes, want %d (content differs)", h, len(got), len(want))
	}
}

// wantErr checks that err wraps target.
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want %v", what, err, target)
	}
}

// listAll returns name -> size for every file of type ft.
func listAll(t testing.TB, b backend.Backend, ft backend.FileType) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	err := b.List(t.Context(), ft, func(fi backend.FileInfo) error {
		if _, dup := m[fi.Name]; dup {
			t.Errorf("List %s: %s listed twice", ft, fi.Name)
		}
		m[fi.Name] = fi.Size
		return nil
	})
	if err != nil {
		t.Fatalf("List %s: %v", ft, err)
	}
	return m
}
