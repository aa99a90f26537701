package chromiumtest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// Golden compares screenshots with the PNGs in Dir.
type Golden struct {
	Dir string // testdata/screenshots of the calling package
	// Update rewrites a golden file whose picture changed beyond the
	// tolerance (the test package's -update flag); an unchanged one is
	// left as it is, since Chromium's PNG bytes vary from run to run.
	Update bool
	// A pixel differs when one of its channels differs by more than
	// Delta (of 255; default 4); the picture matches while at most
	// Fraction of its pixels differ (default 0.005). The tolerance
	// absorbs anti-aliasing, not a changed layout.
	Delta    uint8
	Fraction float64
}

// Check decodes the screenshot, checks it is width pixels wide, and
// compares it with Dir/name: a picture that differs beyond the tolerance,
// or a missing golden file, fails the test (-update rewrites it). The
// screenshot, and on a mismatch a picture of the differing pixels, are
// written to the test's temporary directory, or LIFEBOAT_ARTIFACTS when
// set, to look at.
func (g Golden) Check(t testing.TB, name string, data []byte, width int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	must(t, err)
	if got := img.Bounds().Dx(); got != width {
		t.Fatalf("screenshot %s is %d px wide, want %d", name, got, width)
	}
	out, keep := t.TempDir(), " (set LIFEBOAT_ARTIFACTS=DIR to keep them)"
	if d := os.Getenv("LIFEBOAT_ARTIFACTS"); d != "" {
		out, keep = d, ""
	}
	must(t, os.MkdirAll(out, 0o755))
	must(t, os.WriteFile(filepath.Join(out, name), data, 0o644))
	t.Logf("screenshot %s", filepath.Join(out, name))

	path := filepath.Join(g.Dir, name)
	old, err := os.ReadFile(path)
	var n, total int
	var diff *image.RGBA
	if err == nil {
		n, total, diff, err = g.compare(old, img)
	}
	switch {
	case g.Update && (err != nil || g.tooMany(n, total)):
		must(t, os.MkdirAll(g.Dir, 0o755))
		must(t, os.WriteFile(path, data, 0o644))
		t.Logf("golden screenshot %s rewritten", path)
	case g.Update:
	case os.IsNotExist(err):
		t.Errorf("no golden screenshot %s: run the test with -update to write it", path)
	case err != nil:
		t.Errorf("screenshot %s: %v; if the change is intended, run the test with -update", name, err)
	case g.tooMany(n, total):
		dp := filepath.Join(out, "diff-"+name)
		var buf bytes.Buffer
		must(t, png.Encode(&buf, diff))
		must(t, os.WriteFile(dp, buf.Bytes(), 0o644))
		t.Errorf("screenshot %s differs from %s in %d of %d pixels (more than %.2f%%): see %s and %s%s; if the change is intended, run the test with -update",
			name, path, n, total, 100*g.fraction(), filepath.Join(out, name), dp, keep)
	}
}

func (g Golden) fraction() float64 {
	if g.Fraction <= 0 {
		return 0.005
	}
	return g.Fraction
}

func (g Golden) tooMany(n, total int) bool { return float64(n) > g.fraction()*float64(total) }

// compare counts the pixels of img that differ from the PNG old beyond
// Delta, and paints them red on a faded copy of img.
func (g Golden) compare(old []byte, img image.Image) (n, total int, diff *image.RGBA, err error) {
	o, err := png.Decode(bytes.NewReader(old))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("the golden file does not decode: %w", err)
	}
	if o.Bounds() != img.Bounds() {
		return 0, 0, nil, fmt.Errorf("the golden picture is %v, the screenshot %v", o.Bounds().Size(), img.Bounds().Size())
	}
	delta := uint32(g.Delta)
	if delta == 0 {
		delta = 4
	}
	delta *= 0x101 // 8-bit to 16-bit channels
	b := img.Bounds()
	diff = image.NewRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r1, g1, b1, a1 := o.At(x, y).RGBA()
			r2, g2, b2, a2 := img.At(x, y).RGBA()
			if far(r1, r2, delta) || far(g1, g2, delta) || far(b1, b2, delta) || far(a1, a2, delta) {
				n++
				diff.Set(x, y, color.RGBA{255, 0, 0, 255})
			} else {
				gray := uint8(((r2+g2+b2)/3)>>8)/4 + 191
				diff.Set(x, y, color.RGBA{gray, gray, gray, 255})
			}
		}
	}
	return n, b.Dx() * b.Dy(), diff, nil
}

func far(a, b, d uint32) bool {
	if a > b {
		return a-b > d
	}
	return b-a > d
}
