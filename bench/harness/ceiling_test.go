package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/chunk"
)

// The ceiling reads every regular file, runs every stage, and seals each
// distinct chunk once: twelve small files (one chunk each, whatever the
// polynomial) of which four repeat others make eight blobs, and one file
// just above the minimum chunk size one or two more.
func TestMeasureCeiling(t *testing.T) {
	dir := t.TempDir()
	var want int64
	for i := range 12 {
		body := bytes.Repeat([]byte(fmt.Sprintf("line %d of a small source file\n", i%8)), 200+i%8)
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%3))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d", i)), body, 0o644); err != nil {
			t.Fatal(err)
		}
		want += int64(len(body))
	}
	if err := os.Symlink("d0/f0", filepath.Join(dir, "link")); err != nil { // not read
		t.Fatal(err)
	}
	if want >= int64(chunk.DefaultParams.Min) {
		t.Fatalf("test files of %d bytes are not one chunk each", want)
	}
	// One file above the minimum chunk size goes through the chunker: one
	// chunk, or two if the polynomial cuts in its last byte.
	big := bytes.Repeat([]byte("0123456789abcdef"), int(chunk.DefaultParams.Min)/16+1)
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	want += int64(len(big))
	c, err := MeasureCeiling(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Files != 13 || c.Bytes != want || c.Blobs < 9 || c.Blobs > 10 {
		t.Fatalf("files %d, bytes %d, blobs %d: want 13, %d, 9 or 10", c.Files, c.Bytes, c.Blobs, want)
	}
	if len(c.Stages) != len(Stages) {
		t.Fatalf("stages %+v", c.Stages)
	}
	var sum float64
	for i, st := range c.Stages {
		if st.Name != Stages[i] || st.Seconds <= 0 || st.MBps <= 0 {
			t.Errorf("stage %+v", st)
		}
		sum += st.Seconds
	}
	if got := c.Seconds * float64(c.Procs); got < sum*0.999 || got > sum*1.001 || c.MBps <= 0 || c.MBps > c.Slowest().MBps {
		t.Errorf("together %.6f s, %.1f MB/s; stages sum to %.6f s, slowest %+v", c.Seconds, c.MBps, sum, c.Slowest())
	}
}

func TestMeasureCeilingErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing-here")
	if _, err := MeasureCeiling(context.Background(), missing); err == nil || !strings.Contains(err.Error(), "nothing-here") {
		t.Errorf("missing corpus: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureCeiling(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
