package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "lifeboat"

// rank orders the top-level packages; imports must go to a lower rank.
// Packages under one top-level folder may import each other. A package
// under internal/ with a rank of its own is a layer by itself (a leaf the
// tools of lower layers use); the rest of internal/ is test support.
var rank = map[string]int{
	"blob":               0,
	"internal/memsample": 0,
	"crypt":              1,
	"chunk":              1,
	"backend":            1,
	"pack":               2,
	"index":              3,
	"repo":               4,
	"snapshot":           5,
	"profile":            5,
	"prune":              5,
	"providers":          5,
	"checkpoint":         6,
	"recovery":           7,
	"bench":              7,
	"demo":               8,
	"server":             8,
	"livetest":           8,
	"config":             8,
	"cmd":                9,
	"internal":           10,
}

// top is a package's layer: its top-level folder, or FOLDER/NAME when
// that has a rank of its own.
func top(pkg string) string {
	parts := strings.SplitN(strings.TrimPrefix(pkg, module+"/"), "/", 3)
	if len(parts) > 1 {
		if _, ok := rank[parts[0]+"/"+parts[1]]; ok {
			return parts[0] + "/" + parts[1]
		}
	}
	return parts[0]
}

// violations lists every import under root that breaks the ranking.
func violations(root string) ([]string, int, error) {
	var out []string
	checked := 0
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		from := module + "/" + filepath.ToSlash(rel)
		fromRank, ok := rank[top(from)]
		if !ok {
			out = append(out, fmt.Sprintf("%s: top-level package %q has no rank in layers_test.go; add it", path, top(from)))
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			to, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(to, module+"/") || top(to) == top(from) {
				continue
			}
			checked++
			if toRank, ok := rank[top(to)]; !ok || toRank >= fromRank {
				out = append(out, fmt.Sprintf("%s imports %s: %s (rank %d) may only import lower layers (ARCHITECTURE.md)", from, to, top(from), fromRank))
			}
		}
		return nil
	})
	return out, checked, err
}

func TestImportsPointDown(t *testing.T) {
	bad, checked, err := violations("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range bad {
		t.Error(v)
	}
	if checked == 0 {
		t.Fatal("no imports checked: is the module root right?")
	}
}

// The checker itself catches an upward import.
func TestCheckerCatchesUpwardImport(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pack/p.go", "package pack\nimport _ \"lifeboat/repo\"\n")
	write("repo/r.go", "package repo\nimport _ \"lifeboat/pack\"\n")
	write("backend/local/l.go", "package local\nimport _ \"lifeboat/backend\"\n")
	bad, _, err := violations(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || !strings.Contains(bad[0], "lifeboat/pack imports lifeboat/repo") {
		t.Fatalf("violations = %q, want exactly pack -> repo", bad)
	}
}
