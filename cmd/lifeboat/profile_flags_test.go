package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestProfileFlags: --cpuprofile, --memprofile and --trace write a CPU
// profile and an allocation profile (gzipped protobuf) and a Go execution
// trace for the command they are given to; a file that cannot be created
// is a usage error.
func TestProfileFlags(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := filepath.Join(e.dir, "src")
	must(t, os.MkdirAll(src, 0o700))
	must(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("profiled"), 0o600))
	dir := t.TempDir()
	cpu, mem, tr := filepath.Join(dir, "cpu.out"), filepath.Join(dir, "mem.out"), filepath.Join(dir, "trace.out")
	e.ok("--cpuprofile", cpu, "--memprofile", mem, "--trace", tr, "capture", "--workspace", "w", src)
	for path, magic := range map[string][]byte{cpu: {0x1f, 0x8b}, mem: {0x1f, 0x8b}, tr: []byte("go 1.")} {
		b, err := os.ReadFile(path)
		must(t, err)
		if !bytes.HasPrefix(b, magic) {
			t.Errorf("%s starts with %q, want %q", filepath.Base(path), b[:min(len(b), 8)], magic)
		}
	}
	r := e.run("--trace", filepath.Join(dir, "missing", "trace.out"), "snapshots")
	if r.code != exitUsage {
		t.Fatalf("--trace into a missing directory: exit %d %s", r.code, r.stderr)
	}
}
