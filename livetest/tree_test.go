package livetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
)

// TestCompareTreesNamesEachDifference: two copies of the test tree
// compare equal, and each kind of difference compareTrees promises to
// see (a missing or extra entry, mode, content, symlink target, mtime, a
// hard link split or made) fails the compare naming the entry.
func TestCompareTreesNamesEachDifference(t *testing.T) {
	keep := providers.FileSupport{HardLinks: true}
	cases := []struct {
		name   string
		change func(dir string) error
		want   string
	}{
		{"none", func(string) error { return nil }, ""},
		{"missing", func(d string) error { return os.Remove(filepath.Join(d, "src/main.go")) }, "src/main.go: missing"},
		{"extra", func(d string) error { return os.WriteFile(filepath.Join(d, "extra"), nil, 0o644) }, "extra: not in the source"},
		{"mode", func(d string) error { return os.Chmod(filepath.Join(d, "bin/run.sh"), 0o744) }, "bin/run.sh: mode"},
		{"directory mode", func(d string) error { return os.Chmod(filepath.Join(d, "empty"), 0o755) }, "empty: mode"},
		{"content", func(d string) error {
			p := filepath.Join(d, "src/deep/a/b/data.bin")
			fi, err := os.Stat(p)
			if err == nil {
				err = os.WriteFile(p, make([]byte, fi.Size()), 0o600)
			}
			if err == nil {
				err = os.Chtimes(p, treeTime, treeTime)
			}
			return err
		}, "src/deep/a/b/data.bin: content differs"},
		{"symlink target", func(d string) error {
			p := filepath.Join(d, "latest")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink("README.md", p)
		}, "latest: link target"},
		{"mtime", func(d string) error {
			return os.Chtimes(filepath.Join(d, "README.md"), treeTime, treeTime.Add(time.Second))
		}, "README.md: mtime"},
		{"link split", func(d string) error {
			p := filepath.Join(d, "notes/README-link.md")
			b, err := os.ReadFile(p)
			if err == nil {
				err = os.Remove(p)
			}
			if err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
			if err == nil {
				err = os.Chtimes(p, treeTime, treeTime)
			}
			return err
		}, "README.md and notes/README-link.md: one file in the source, two in the instance"},
		{"link made", func(d string) error {
			a, b := filepath.Join(d, "src/main.go"), filepath.Join(d, "src/main-copy.go")
			return os.Link(a, b)
		}, "src/main-copy.go and src/main.go: two files in the source, one in the instance"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, got := filepath.Join(t.TempDir(), "want"), filepath.Join(t.TempDir(), "got")
			for _, d := range []string{want, got} {
				if err := writeTree(d, keep); err != nil {
					t.Fatal(err)
				}
			}
			if c.name == "link made" { // the source has the copy as a file of its own
				p := filepath.Join(want, "src/main-copy.go")
				b, err := os.ReadFile(filepath.Join(want, "src/main.go"))
				if err == nil {
					err = os.WriteFile(p, b, 0o644)
				}
				if err == nil {
					err = os.Chtimes(p, treeTime, treeTime)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := c.change(got); err != nil {
				t.Fatal(err)
			}
			err := compareTrees(want, got, keep, "")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("equal trees: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error naming %q", err, c.want)
			}
		})
	}
}
