package s3

import (
	"runtime"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/internal/s3test"
)

// TestSaveTempStreams: a pack saved from its temp file goes out in one
// PUT streamed from the file: the upload of 48 MiB allocates a small
// fraction of that, never the pack.
func TestSaveTempStreams(t *testing.T) {
	srv := s3test.Start(t)
	b := newTestBackend(t, srv, "")
	f, err := b.CreateTemp()
	if err != nil {
		t.Fatal(err)
	}
	piece := make([]byte, 1<<20)
	for i := range piece {
		piece[i] = byte(i * 7)
	}
	const size = 48 << 20
	for range size / len(piece) {
		if _, err := f.Write(piece); err != nil {
			t.Fatal(err)
		}
	}
	h := backend.Handle{Type: backend.Pack, Name: strings.Repeat("cd", 32)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := b.SaveTemp(t.Context(), h, f); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("SaveTemp of %d MiB allocated %.1f MiB", size>>20, float64(alloc)/(1<<20))
	if alloc > size/4 {
		t.Errorf("SaveTemp of %d MiB allocated %d MiB: the pack is not streamed", size>>20, alloc>>20)
	}
	fi, err := b.Stat(t.Context(), h)
	if err != nil || fi.Size != size {
		t.Fatalf("Stat after SaveTemp: %+v, %v", fi, err)
	}
	got, err := b.Load(t.Context(), h, size-int64(len(piece)), len(piece))
	if err != nil || string(got) != string(piece) {
		t.Fatalf("Load of the last MiB: %v", err)
	}
}
