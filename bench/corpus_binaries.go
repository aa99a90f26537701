package bench

import (
	"fmt"
	"os"
	"path/filepath"
)

// BinariesScale sizes the large-binary corpus of GenerateBinaries: a
// workspace dominated by shared libraries, a browser build and data, with
// documentation and a Go module cache of many small files.
type BinariesScale struct {
	Libs         int   // shared libraries, ELF-like, 100 KiB to LibMaxMiB (most under 1 MiB)
	LibMaxMiB    int   // the largest a library can be
	BrowserMiB   []int // the browser build's large binaries, one per entry
	BrowserFiles int   // its small files: resource and locale packs, generated scripts (1-256 KiB)
	Docs         int   // documentation pages, HTML and text (1-24 KiB)
	DataFiles    int   // data files: CSV, JSON, float32 arrays (16 KiB to DataMaxMiB)
	DataMaxMiB   int   // the largest a data file can be
	ModFiles     int   // Go source files in the module cache (256 B-16 KiB), 40 per module version
}

// Where GenerateBinaries puts each part, relative to the corpus root.
const (
	LibDir      = "usr/lib/x86_64-linux-gnu"
	BrowserDir  = "opt/browser/out/Release"
	DocDir      = "usr/share/doc"
	DataDir     = "data/sets"
	ModCacheDir = "go/pkg/mod"
	modFilesPer = 40 // source files per module version
)

var browserBinaries = []string{"chrome", "libcontent.so", "content_shell", "libv8.so", "browser_tests", "unit_tests"}

// GenerateBinaries writes the large-binary corpus under dir. Every byte
// comes from seed, and files are written a buffer at a time, so the
// corpus is never held in memory.
func GenerateBinaries(dir string, seed uint64, s BinariesScale) error {
	g := newFiller(seed, 0xb1a5)
	for i := range s.Libs {
		if err := g.library(dir, i, s.LibMaxMiB); err != nil {
			return err
		}
	}
	for i, mib := range s.BrowserMiB {
		name := fmt.Sprintf("bin%d", i)
		if i < len(browserBinaries) {
			name = browserBinaries[i]
		}
		if err := g.create(filepath.Join(dir, BrowserDir, name), 0o755, g.bigBinary(mib<<20)...); err != nil {
			return err
		}
	}
	for i := range s.BrowserFiles {
		if err := g.browserFile(dir, i, seed); err != nil {
			return err
		}
	}
	for i := range s.Docs {
		if err := g.doc(filepath.Join(dir, DocDir), i); err != nil {
			return err
		}
	}
	for i := range s.DataFiles {
		if err := g.dataFile(dir, i, s.DataMaxMiB); err != nil {
			return err
		}
	}
	for i := range s.ModFiles {
		if err := g.modFile(dir, i); err != nil {
			return err
		}
	}
	return stampAll(dir)
}

// library writes a shared library, and for every third one the symlink
// a linker uses.
func (g *filler) library(dir string, i, maxMiB int) error {
	n := g.logSize(100<<10, max(maxMiB<<20, 100<<10), 3)
	name := fmt.Sprintf("lib%s%d.so.%d", words[i%len(words)], i, 1+i%3)
	p := filepath.Join(dir, LibDir, name)
	if err := g.create(p, 0o755, g.elf(n)...); err != nil {
		return err
	}
	if i%3 == 0 {
		return os.Symlink(name, filepath.Join(dir, LibDir, fmt.Sprintf("lib%s%d.so", words[i%len(words)], i)))
	}
	return nil
}

// elf lays out n bytes like a shared library: a header, symbol names,
// code, read-only strings, unwind tables, data and padding. About 1.8x
// compressible.
func (g *filler) elf(n int) []section {
	secs := []section{{kindText, len(elfHeader[0]), &elfHeader}, {kindText, n * 8 / 100, &symbolWords}, {kindCode, n * 50 / 100, nil},
		{kindText, n * 14 / 100, &symbolWords}, {kindCode, n * 6 / 100, nil}, {kindRandom, n * 12 / 100, nil}}
	used := 0
	for _, s := range secs {
		used += s.n
	}
	return append(secs, section{kindZero, max(0, n-used), nil})
}

// bigBinary lays out n bytes of a large browser binary: segments of 1-4
// MiB, each seven tenths incompressible (packed resources, compressed
// data), two tenths code and one tenth strings. About 1.15x compressible.
func (g *filler) bigBinary(n int) []section {
	secs := []section{{kindText, len(elfHeader[0]), &elfHeader}}
	for left := n - secs[0].n; left > 0; {
		k := min(left, (1+g.rng.IntN(4))<<20)
		secs = append(secs, section{kindRandom, k * 7 / 10, nil}, section{kindCode, k * 2 / 10, nil},
			section{kindText, k - k*7/10 - k*2/10, &symbolWords})
		left -= k
	}
	return secs
}

// browserFile writes one of the browser build's small files: a resource
// pack (half random, half strings), a locale pack or a generated script.
func (g *filler) browserFile(dir string, i int, seed uint64) error {
	n := g.logSize(1<<10, 256<<10, 1)
	root := filepath.Join(dir, BrowserDir)
	switch i % 4 {
	case 0:
		return g.create(filepath.Join(root, "resources", fmt.Sprintf("res%05d.pak", i)), 0o644,
			section{kindRandom, n / 2, nil}, section{kindText, n - n/2, &htmlWords})
	case 1:
		return g.create(filepath.Join(root, "locales", fmt.Sprintf("l%03d", i/4%97), fmt.Sprintf("strings%05d.pak", i)), 0o644,
			section{kindText, n, &htmlWords})
	default:
		return g.create(filepath.Join(root, "gen", fmt.Sprintf("mod%03d", i/2%211), fmt.Sprintf("gen%05d.js", i)), 0o644,
			section{kindText, n, &goWords})
	}
}

// doc writes a documentation page: HTML, or plain text for one in four.
func (g *filler) doc(root string, i int) error {
	n := g.logSize(1<<10, 24<<10, 1)
	dir := filepath.Join(root, fmt.Sprintf("pkg%04d", i/12))
	if i%4 == 3 {
		return g.create(filepath.Join(dir, fmt.Sprintf("README%05d.txt", i)), 0o644, section{kindText, n, &goWords})
	}
	return g.create(filepath.Join(dir, fmt.Sprintf("page%05d.html", i)), 0o644,
		section{kindText, 64, &htmlHeader}, section{kindText, n, &htmlWords})
}

// dataFile writes a data file: CSV, JSON or float32 arrays.
func (g *filler) dataFile(dir string, i, maxMiB int) error {
	n := g.logSize(16<<10, max(maxMiB<<20, 16<<10), 2)
	d := filepath.Join(dir, DataDir, fmt.Sprintf("set%02d", i/16))
	switch i % 3 {
	case 0:
		return g.create(filepath.Join(d, fmt.Sprintf("part%04d.csv", i)), 0o644, section{kindText, n, &csvWords})
	case 1:
		return g.create(filepath.Join(d, fmt.Sprintf("part%04d.json", i)), 0o644, section{kindText, n, &jsonWords})
	default:
		return g.create(filepath.Join(d, fmt.Sprintf("part%04d.f32", i)), 0o644, section{kindFloat, n &^ 7, nil})
	}
}

// modFile writes the i-th source file of the module cache, read-only as
// the go command leaves them, and the go.mod of each module version.
func (g *filler) modFile(dir string, i int) error {
	m := i / modFilesPer
	mod := filepath.Join(dir, ModCacheDir, "github.com", fmt.Sprintf("org%02d", m%37), fmt.Sprintf("mod%04d@v1.%d.0", m, m%9))
	if i%modFilesPer == 0 {
		if err := g.create(filepath.Join(mod, "go.mod"), 0o444, section{kindText, 200 + g.rng.IntN(400), &goWords}); err != nil {
			return err
		}
	}
	n := g.logSize(256, 16<<10, 1)
	return g.create(filepath.Join(mod, fmt.Sprintf("pkg%d", i%modFilesPer/8), fmt.Sprintf("file%05d.go", i)), 0o444, section{kindText, n, &goWords})
}

// Vocabularies of 32 words for fillText.
var (
	goWords = [32]string{"func", "return", "if", "err", "nil", "package", "import", "type", "struct", "for", "range", "go",
		"defer", "select", "case", "default", "var", "const", "map", "chan", "{", "}", "(ctx", "context.Context)", "error", ":=",
		"fmt.Errorf(\"%w\",", "len(b)", "int", "string", "[]byte", "//"}
	htmlWords = [32]string{"<p>", "</p>", "<div", "class=\"section\">", "</div>", "<a", "href=\"#\">", "</a>", "<code>", "</code>",
		"the", "of", "a", "to", "is", "returns", "function", "value", "option", "file", "when", "set", "see", "and", "in", "for",
		"<li>", "</li>", "<pre>", "</pre>", "default", "example"}
	csvWords = [32]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "12", "15", "20", "0.5", "1.25", "3.14",
		"2026-01-02,", "true,", "false,", "ok,", "error,", "42,", "17,", "-1,", "100,", "user,", "item,", "NA,", ",", ",", ","}
	jsonWords = [32]string{"{", "}", "[", "]", "\"id\":", "\"name\":", "\"value\":", "\"tags\":", "\"ts\":", "1,", "2,", "3.5,",
		"\"a\",", "\"b\",", "true,", "false,", "null,", "\"status\":", "\"ok\",", "\"path\":", "\"/data\",", "{\"k\":", "0},",
		"\"items\":", "\"count\":", "12,", "100,", "7,", "\"x\",", "\"y\",", "\"z\":", "\"w\":"}
	symbolWords = [32]string{"_ZN4base", "_ZNSt3", "__cxa_", "malloc", "free", "memcpy", "pthread_", "GLIBC_2.17", "@plt",
		".text", ".rodata", "init", "fini", "v8", "internal", "Isolate", "Heap", "Object", "String", "Handle", "E", "Ev", "PKc",
		"St6vector", "Alloc", "Get", "Set", "New", "Delete", "Run", "Task", "%s:%d"}
	// Single-word vocabularies: fixed text.
	elfHeader  = vocab1("\x7fELF\x02\x01\x01\x00")
	htmlHeader = vocab1("<!DOCTYPE html><html><head><title>doc</title></head><body>")
)

func vocab1(w string) [32]string {
	var v [32]string
	for i := range v {
		v[i] = w
	}
	return v
}
