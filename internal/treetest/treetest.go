// Package treetest writes small file trees for tests, in one way for
// every package.
//
// It is imported by tests only; it imports nothing of the module.
package treetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Write creates entries (slash path -> content) below root, making the
// parent directories: a content starting with "->" makes a symlink to the
// rest, "/" a directory, "|" a FIFO, anything else a regular file with
// that content (mode 0644). It fails t on any error.
func Write(t testing.TB, root string, entries map[string]string) {
	t.Helper()
	for rel, s := range entries {
		p := filepath.Join(root, filepath.FromSlash(rel))
		var err error
		if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			switch {
			case strings.HasPrefix(s, "->"):
				err = os.Symlink(s[2:], p)
			case s == "/":
				err = os.MkdirAll(p, 0o755)
			case s == "|":
				err = unix.Mkfifo(p, 0o644)
			default:
				err = os.WriteFile(p, []byte(s), 0o644)
			}
		}
		if err != nil {
			t.Fatalf("writing the test tree: %v", err)
		}
	}
}
