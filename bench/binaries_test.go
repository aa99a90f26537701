package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

var smallBinaries = BinariesScale{Libs: 6, LibMaxMiB: 2, BrowserMiB: []int{3, 1}, BrowserFiles: 20, Docs: 30, DataFiles: 6,
	DataMaxMiB: 1, ModFiles: 100}

func TestGenerateBinariesIsDeterministicWithChurn(t *testing.T) {
	s := smallBinaries
	a, b, c := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b"), filepath.Join(t.TempDir(), "c")
	for i, d := range []string{a, b, c} {
		if err := GenerateBinaries(d, 42+uint64(i/2), s); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := Compare(a, b); err != nil || len(d) != 0 {
		t.Fatalf("same seed differs: %v %v", d, err)
	}
	if d, _ := Compare(a, c); len(d) == 0 {
		t.Fatal("another seed gives the same corpus")
	}
	// The shape: files per part, the browser binaries' exact sizes, modes
	// and how well each part compresses.
	parts := []struct {
		dir              string
		files            int
		minRatio, maxRat float64
	}{
		{LibDir, s.Libs, 1.3, 2.2},
		{DocDir, s.Docs, 2.5, 5},
		{DataDir, s.DataFiles, 1.2, 4},
		{ModCacheDir, s.ModFiles + (s.ModFiles+modFilesPer-1)/modFilesPer, 2.5, 5},
		{filepath.Join(BrowserDir, "gen"), s.BrowserFiles / 2, 2.5, 5},
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	ratio := func(paths ...string) float64 {
		var n, z int
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			n += len(data)
			z += len(enc.EncodeAll(data, nil))
		}
		return float64(n) / float64(z)
	}
	total := 0
	for _, p := range parts {
		files, err := listFiles(filepath.Join(a, p.dir), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != p.files {
			t.Errorf("%s: %d files, want %d", p.dir, len(files), p.files)
		}
		if r := ratio(files...); r < p.minRatio || r > p.maxRat {
			t.Errorf("%s compresses %.2fx, want %.1f-%.1fx", p.dir, r, p.minRatio, p.maxRat)
		}
		total += len(files)
	}
	for i, mib := range s.BrowserMiB {
		p := filepath.Join(a, BrowserDir, browserBinaries[i])
		fi, err := os.Stat(p)
		if err != nil || fi.Size() != int64(mib)<<20 || fi.Mode().Perm() != 0o755 {
			t.Fatalf("browser binary %s: %v %v", p, fi, err)
		}
		if r := ratio(p); r < 1.02 || r > 1.4 {
			t.Errorf("%s compresses %.2fx, want mostly incompressible", p, r)
		}
	}
	st, err := Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	// The parts above, the browser binaries, resource and locale packs.
	if want := total + len(s.BrowserMiB) + s.BrowserFiles/2; st.Files != want {
		t.Errorf("corpus has %d files, want %d", st.Files, want)
	}
	if fi, err := os.Lstat(filepath.Join(a, LibDir, "libfunc0.so")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("library symlink: %v %v", fi, err)
	}
	mods, _ := listFiles(filepath.Join(a, ModCacheDir), ".go")
	if fi, err := os.Stat(mods[0]); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("module cache file %s: %v %v", mods[0], fi, err)
	}

	r, pristine := churnTwice(t, a, b, func(dir string) (ChurnReport, error) { return ChurnBinaries(dir, 9, 0.2) })
	// 20%: 1 of 6 libraries, both browser binaries, 6 of 30 docs; 4% of
	// 10 scripts and 100 module files; 1 of 6 data files appended.
	if r.Edited != 1+2+6 || r.Deleted != 1 || r.Added != 1+4 || r.Appended < 4096 {
		t.Fatalf("churn of 20%% of the small binaries corpus: %+v", r)
	}
	if d, err := Compare(pristine, a); err != nil || len(d) < r.Paths() {
		t.Fatalf("churn touched %d paths, compare found %d: %v", r.Paths(), len(d), err)
	}
	st2, err := Stat(a)
	if err != nil || st2.Files != st.Files+r.Added-r.Deleted || st2.Bytes <= st.Bytes {
		t.Fatalf("after churn %+v, before %+v, report %+v: %v", st2, st, r, err)
	}
}
