package local

import (
	"bytes"
	"errors"
	"testing"

	"lifeboat/backend"
)

// TestHugeRangeFailsFast: a range past the end fails before allocating.
func TestHugeRangeFailsFast(t *testing.T) {
	b := newRepo(t)
	h, _ := savePack(t, b, 10)
	if _, err := b.Load(t.Context(), h, 0, 1<<40); !errors.Is(err, backend.ErrShortRead) {
		t.Errorf("Load of 1 TiB from 10 bytes: %v", err)
	}
}

func TestLoadExactBytes(t *testing.T) {
	b := newRepo(t)
	h, data := savePack(t, b, 3<<20)
	got, err := b.Load(t.Context(), h, 1<<20+5, 1<<20)
	if err != nil || !bytes.Equal(got, data[1<<20+5:2<<20+5]) || cap(got) != 1<<20 {
		t.Errorf("ranged Load: len %d cap %d, %v", len(got), cap(got), err)
	}
}
