package profile

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// benchCorpus writes a workspace-like tree without profiles into root:
// 20,000 files in 450 directories (10 top directories of 44
// subdirectories each, files spread over all of them).
func benchCorpus(root string) error {
	var dirs []string
	for i := range 10 {
		top := filepath.Join(root, fmt.Sprintf("pkg%02d", i))
		dirs = append(dirs, top)
		for j := range 44 {
			dirs = append(dirs, filepath.Join(top, fmt.Sprintf("sub%02d", j)))
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for i := range 20000 {
		p := filepath.Join(dirs[i%len(dirs)], fmt.Sprintf("file%05d.go", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func benchDiscover(b *testing.B, discover func(string) ([]Profile, error)) {
	root := b.TempDir()
	if err := benchCorpus(root); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		ps, err := discover(root)
		if err != nil || len(ps) != 0 {
			b.Fatalf("%v %v", ps, err)
		}
	}
	// CPU time (user + system, garbage collection included) varies less
	// than wall time on a shared machine.
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDiscover times Discover on the corpus; BenchmarkDiscoverOld
// times the former WalkDir-based algorithm on the same tree.
func BenchmarkDiscover(b *testing.B)    { benchDiscover(b, Discover) }
func BenchmarkDiscoverOld(b *testing.B) { benchDiscover(b, discoverRef) }
