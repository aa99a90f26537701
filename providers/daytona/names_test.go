package daytona

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// TestAwkwardNames: names GNU tar and find could misread (leading dashes
// that look like options, a name that is a tar option with a value,
// spaces, quotes, a newline, a backslash, a glob) travel both ways
// through the sandbox's tar and find: WriteFiles and Switch put them in
// place, ReadFiles mirrors them, and an incremental ReadFiles after a
// change in the sandbox still shows exactly the sandbox's tree.
func TestAwkwardNames(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "dtn_key")
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "awkward"})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	names := []string{"-rf", "--files-from=x", "-C", "--to-command=touch pwned", "sp ace", " lead", `q"uote`, "s'ingle",
		"new\nline", `back\slash`, "*", "-d/-inner", "-d/--verbose"}
	for _, n := range names {
		fp := filepath.Join(src, n)
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fp, []byte("content of "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	providertest.PutTree(t, p, id, src)
	platformtest.WantTree(t, p, id, src, "the first ReadFiles")

	// A change in the sandbox, then an incremental read.
	host, err := s.HostPath(string(id), "/home/daytona/workspace/-rf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host, []byte("changed in the sandbox, longer than before"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "-rf"), []byte("changed in the sandbox, longer than before"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostNew, _ := s.HostPath(string(id), "/home/daytona/workspace/new\nline")
	if err := os.Remove(hostNew); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "new\nline")); err != nil {
		t.Fatal(err)
	}
	platformtest.WantTree(t, p, id, src, "the incremental ReadFiles")
	if _, err := os.Lstat(filepath.Join(filepath.Dir(host), "pwned")); err == nil {
		t.Fatal("a name was run as a tar option in the sandbox")
	}
}
