package capture

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// capBenchTree writes a tree of many small files (100 per directory, 100 B
// to 8 KiB of random bytes each, seed fixed) and returns its root, its
// file count and its bytes. LIFEBOAT_BENCH_FILES sets the file count
// (default def).
func capBenchTree(b *testing.B, def int) (root string, n int, total int64) {
	n = def
	if s := os.Getenv("LIFEBOAT_BENCH_FILES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	root = b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 8<<10)
	for i := range n {
		dir := filepath.Join(root, "d"+strconv.Itoa(i/10000), "s"+strconv.Itoa(i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		data := buf[:100+rng.IntN(8<<10-100)]
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		total += int64(len(data))
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	capTestAge(b, root)
	return root, n, total
}

// BenchmarkCaptureSmallFiles captures capBenchTree's tree (100,000 files
// by default), first into an empty repository and then unchanged with the
// file cache. Run with -benchtime=1x.
func BenchmarkCaptureSmallFiles(b *testing.B) {
	root, n, total := capBenchTree(b, 100_000)
	b.ResetTimer()
	for b.Loop() {
		r := capTestOpenRepo(b)
		o, read := capTestCacheOptions(r)
		start := time.Now()
		m1, err := Run(context.Background(), r, root, o)
		if err != nil {
			b.Fatal(err)
		}
		first := time.Since(start)
		read.Store(0)
		start = time.Now()
		m2, err := Run(context.Background(), r, root, o)
		if err != nil {
			b.Fatal(err)
		}
		second := time.Since(start)
		if read.Load() != 0 || m1.Totals.Files != uint64(n) || m2.Totals.Bytes != uint64(total) {
			b.Fatalf("second capture read %d bytes; totals %+v %+v", read.Load(), m1.Totals, m2.Totals)
		}
		b.ReportMetric(first.Seconds(), "first-s")
		b.ReportMetric(second.Seconds(), "unchanged-s")
		b.ReportMetric(float64(n)/first.Seconds(), "first-files/s")
		b.ReportMetric(float64(n)/second.Seconds(), "unchanged-files/s")
		b.ReportMetric(float64(total)/first.Seconds()/1e6, "first-MB/s")
	}
}

// BenchmarkCaptureUnchanged times only unchanged re-captures of
// capBenchTree's tree (20,000 files by default), each reading no file
// content: the walk, the file cache and the trees. One op is one capture.
func BenchmarkCaptureUnchanged(b *testing.B) {
	root, n, _ := capBenchTree(b, 20_000)
	r := capTestOpenRepo(b)
	o, read := capTestCacheOptions(r)
	if _, err := Run(context.Background(), r, root, o); err != nil {
		b.Fatal(err)
	}
	read.Store(0)
	b.ResetTimer()
	user, sys := capBenchCPU(b)
	for b.Loop() {
		m, err := Run(context.Background(), r, root, o)
		if err != nil {
			b.Fatal(err)
		}
		if read.Load() != 0 || m.Totals.Files != uint64(n) {
			b.Fatalf("unchanged capture read %d bytes; totals %+v", read.Load(), m.Totals)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "files/s")
	// CPU time per entry (garbage collection included) varies less than
	// wall time on a shared machine; user time, without the system calls,
	// less still.
	user2, sys2 := capBenchCPU(b)
	perFile := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(n) }
	b.ReportMetric(perFile(user2-user+sys2-sys), "cpu-ns/file")
	b.ReportMetric(perFile(user2-user), "user-ns/file")
}

// capBenchCPU is this process's user and system CPU time so far.
func capBenchCPU(b *testing.B) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
