package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "lifeboat"

// allowed lists, for each package of the module (its path below the
// module root), the module packages its non-test files may import. An
// import that is not listed here fails the test; so does an entry for a
// package that no longer exists. Adding an edge is a design change: draw
// it in docs/architecture.md too.
var allowed = map[string][]string{
	// The storage engine, bottom up: the vocabulary, crypto and chunking,
	// storage, packs, the index, the Repository.
	"blob":                    {},
	"chunk":                   {},
	"crypt":                   {"blob"},
	"backend":                 {},
	"backend/local":           {"backend"},
	"backend/s3":              {"backend"},
	"backend/fault":           {"backend"},
	"backend/location":        {"backend", "backend/local", "backend/s3"},
	"backend/backendtest":     {"backend", "backend/fault"},
	"pack":                    {"blob", "crypt"},
	"index":                   {"backend", "blob", "crypt", "pack"},
	"index/internal/rsscheck": {"blob", "crypt", "index", "internal/memsample", "pack"},
	"repo":                    {"backend", "blob", "chunk", "crypt", "index", "pack"},

	// What is stored in a repository: snapshots (the format; capture and
	// restore, which never import each other), garbage collection,
	// browser profiles (no storage at all).
	"snapshot":                     {"backend", "blob", "crypt", "repo"},
	"snapshot/capture":             {"backend", "blob", "crypt", "repo", "snapshot"},
	"snapshot/restore":             {"blob", "crypt", "repo", "snapshot"},
	"snapshot/internal/snaptest":   {"backend", "blob", "internal/repotest", "internal/storetest", "repo", "snapshot"},
	"snapshot/internal/race":       {},
	"snapshot/snapshottest":        {"snapshot"},
	"prune":                        {"backend", "blob", "crypt", "index", "repo"},
	"prune/internal/rsscheck":      {"backend/local", "blob", "crypt", "internal/memsample", "prune", "repo"},
	"profile":                      {"internal/sqlitedsn"},
	"profile/profiletest":          {},
	"profile/fixture":              {"internal/sqlitedsn"},
	"profile/fixture/localstorage": {"profile/fixture"},

	// Where workspaces live: the provider interface, its helpers and adapters.
	// Nothing here knows about repositories.
	"providers":                      {},
	"providers/fsmeta":               {},
	"providers/tartree":              {"providers/fsmeta"},
	"providers/mirror":               {"providers"},
	"providers/httpapi":              {"providers"},
	"providers/boxfiles":             {"providers", "providers/fsmeta", "providers/httpapi", "providers/mirror", "providers/tartree"},
	"providers/local":                {"providers", "providers/fsmeta"},
	"providers/ssh":                  {"providers", "providers/fsmeta", "providers/mirror", "providers/tartree"},
	"providers/docker":               {"providers", "providers/fsmeta", "providers/mirror", "providers/tartree"},
	"providers/e2b":                  {"providers", "providers/boxfiles", "providers/httpapi"},
	"providers/vercel":               {"providers", "providers/boxfiles", "providers/httpapi"},
	"providers/daytona":              {"providers", "providers/boxfiles", "providers/httpapi"},
	"providers/cloudflare":           {"providers", "providers/boxfiles", "providers/httpapi"},
	"providers/managedagents":        {"providers", "providers/httpapi"},
	"providers/providertest":         {"providers", "providers/fsmeta"},
	"providers/platformtest":         {"providers", "providers/providertest"},
	"providers/docker/dockertest":    {},
	"providers/ssh/sshdtest":         {},
	"providers/e2b/e2btest":          {},
	"providers/managedagents/matest": {},

	// Checkpointing a workspace: one implementation for the CLI and the lifecycle.
	"checkpoint": {"backend", "blob", "crypt", "profile", "prune", "repo", "snapshot", "snapshot/capture"},

	// The lifecycle the server drives, and its stores.
	"recovery":                {"backend", "blob", "checkpoint", "crypt", "profile", "providers", "providers/fsmeta", "providers/local", "prune", "recovery/dirlock", "recovery/dirwatch", "recovery/pgstate", "recovery/statedb", "repo", "snapshot", "snapshot/restore"},
	"recovery/dirlock":        {"providers", "snapshot"},
	"recovery/dirwatch":       {},
	"recovery/statedb":        {},
	"recovery/pgstate":        {"recovery/statedb"},
	"recovery/statedb/pgtest": {},

	// The top: the service, its config, the tools the CLI runs.
	"server":        {"backend", "crypt", "providers", "prune", "recovery"},
	"config":        {"backend/s3", "prune"},
	"livetest":      {"profile/fixture", "providers", "providers/fsmeta", "recovery"},
	"demo":          {"backend/local", "bench", "crypt", "providers", "providers/local", "recovery", "repo"},
	"bench":         {"profile", "profile/fixture", "repo", "snapshot", "snapshot/capture", "snapshot/restore"},
	"bench/harness": {"bench", "blob", "chunk", "crypt", "internal/memsample", "pack", "profile/fixture", "profile/fixture/localstorage"},

	// The binaries.
	"cmd/lifeboat": {"backend", "backend/location", "backend/s3", "blob", "checkpoint", "cmd/lifeboat/internal/gcfloor", "config", "crypt", "demo", "internal/jsonlines", "internal/keyring", "livetest", "profile", "providers",
		"providers/cloudflare", "providers/daytona", "providers/docker", "providers/e2b", "providers/local", "providers/managedagents", "providers/ssh", "providers/vercel",
		"prune", "recovery", "repo", "server", "snapshot", "snapshot/capture", "snapshot/restore"},
	"cmd/lifeboat/internal/gcfloor": {},
	"cmd/lifeboat-bench":            {"bench/harness", "internal/jsonlines"},

	// Leaves shared by tools and tests.
	"internal/osutil":                  {},
	"internal/keylock":                 {},
	"internal/memsample":               {},
	"internal/keyring":                 {},
	"internal/keyring/keyringtest":     {},
	"internal/chromiumtest":            {},
	"internal/s3test":                  {},
	"internal/storetest":               {"backend", "backend/location", "internal/s3test"},
	"internal/repotest":                {"backend", "blob", "crypt", "internal/storetest", "pack", "repo"},
	"internal/clocktest":               {},
	"internal/seedtest":                {},
	"internal/treetest":                {},
	"internal/busywriter":              {},
	"internal/jsonlines":               {},
	"internal/jsonlines/jsonlinestest": {"internal/jsonlines"},
	"internal/sqlitedsn":               {},
	"internal/nstest":                  {"internal/proctest"},
	"internal/proctest":                {},
	"internal/ssetest":                 {},
	"internal/layers":                  {},
}

// everywhere lists the small utilities any package may import, each
// written once: they import nothing of the module (their entries above
// are empty), so they cannot make a cycle or carry a layer upward.
var everywhere = []string{"internal/osutil", "internal/keylock"}

// imports maps each package under root (its path below root) to the
// module packages its non-test files import.
func imports(root string) (map[string][]string, error) {
	out := map[string][]string{}
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
		pkg := filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			to, _ := strconv.Unquote(imp.Path.Value)
			if dep, ok := strings.CutPrefix(to, module+"/"); ok && !slices.Contains(out[pkg], dep) {
				out[pkg] = append(out[pkg], dep)
			}
		}
		return nil
	})
	return out, err
}

// violations checks the packages under root against table, where every
// package may also import those in anywhere.
func violations(root string, table map[string][]string, anywhere []string) (bad []string, checked int, err error) {
	got, err := imports(root)
	if err != nil {
		return nil, 0, err
	}
	for pkg, deps := range got {
		may, ok := table[pkg]
		if !ok {
			bad = append(bad, fmt.Sprintf("package %s is not in the table of allowed imports (internal/layers/layers_test.go): add it with the imports it may make", pkg))
			continue
		}
		for _, dep := range deps {
			checked++
			if !slices.Contains(may, dep) && !slices.Contains(anywhere, dep) {
				bad = append(bad, fmt.Sprintf("%s imports %s: not an allowed edge (internal/layers/layers_test.go, docs/architecture.md)", pkg, dep))
			}
		}
	}
	for _, leaf := range anywhere {
		if len(table[leaf]) > 0 {
			bad = append(bad, fmt.Sprintf("%s may be imported everywhere, so it may import nothing of the module: empty its entry", leaf))
		}
		if _, ok := got[leaf]; !ok {
			bad = append(bad, fmt.Sprintf("the everywhere list names %s, which no longer exists: remove it", leaf))
		}
	}
	for pkg, may := range table {
		if _, ok := got[pkg]; !ok {
			bad = append(bad, fmt.Sprintf("the table names package %s, which no longer exists: remove its entry", pkg))
		}
		for _, dep := range may {
			if _, ok := got[dep]; !ok {
				bad = append(bad, fmt.Sprintf("the table lets %s import %s, which no longer exists: remove it", pkg, dep))
			}
		}
	}
	slices.Sort(bad)
	return bad, checked, nil
}

func TestImportsFollowTheTable(t *testing.T) {
	bad, checked, err := violations("../..", allowed, everywhere)
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

// The checker catches an edge the table does not list, a package the
// table does not name, and table entries for packages that are gone.
func TestCheckerCatchesEdgesOutsideTheTable(t *testing.T) {
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
	write("repo/r_test.go", "package repo\nimport _ \"lifeboat/snapshot\"\n") // test files are not checked
	write("backend/local/l.go", "package local\nimport _ \"lifeboat/backend\"\n")
	write("backend/b.go", "package backend\n")
	write("blob/b.go", "package blob\n")
	write("util/u.go", "package util\nimport _ \"lifeboat/blob\"\n")
	write("backend/b2.go", "package backend\nimport _ \"lifeboat/util\"\n") // util may go anywhere
	table := map[string][]string{
		"pack":          {},
		"repo":          {"pack"},
		"backend":       {},
		"backend/local": {"backend"},
		"gone":          {},
		"backend/s3":    {"backend"},
		"crypt":         {},
		"util":          {"blob"},
	}
	bad, _, err := violations(root, table, []string{"util"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"package blob is not in the table",
		"pack imports repo: not an allowed edge",
		"names package backend/s3, which no longer exists",
		"names package crypt, which no longer exists",
		"names package gone, which no longer exists",
		"util may be imported everywhere, so it may import nothing",
	}
	if len(bad) != len(want) {
		t.Fatalf("violations = %q, want %d", bad, len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, w) }) {
			t.Errorf("violations = %q, missing %q", bad, w)
		}
	}
}
