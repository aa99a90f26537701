package restore

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"lifeboat/snapshot/internal/snaptest"
)

// BenchmarkRestore restores a mixed corpus: a few large incompressible
// binaries, many small source-like files, medium files in between. Size in
// MiB from LIFEBOAT_BENCH_MB (default 64); LIFEBOAT_BENCH_DIR puts the
// corpus, repository and targets on another disk.
//
//	LIFEBOAT_BENCH_MB=500 go test -run - -bench Run -benchtime 3x ./snapshot/
func BenchmarkRestore(b *testing.B) {
	mb := 64
	if s := os.Getenv("LIFEBOAT_BENCH_MB"); s != "" {
		var err error
		if mb, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	base := b.TempDir()
	if d := os.Getenv("LIFEBOAT_BENCH_DIR"); d != "" {
		var err error
		if base, err = os.MkdirTemp(d, "restore-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(base) })
	}
	src := filepath.Join(base, "src")
	files, total := rsBenchCorpus(b, src, int64(mb)<<20)
	b.Logf("corpus: %d files, %d MiB", files, total>>20)
	b.Run("lifeboat", func(b *testing.B) {
		r := snaptest.NewRepo(b)
		m := r.SnapshotOf(b, src)
		b.SetBytes(total)
		i := 0
		for b.Loop() {
			target := filepath.Join(base, "target"+strconv.Itoa(i))
			i++
			if _, err := Run(b.Context(), r.Repository, m, Options{Target: target}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.RemoveAll(target); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	// restic 0.14 (compression auto) on the same corpus, when installed:
	// the yardstick. restic does not fsync restored files.
	b.Run("restic", func(b *testing.B) {
		if _, err := exec.LookPath("restic"); err != nil {
			b.Skip("restic not installed")
		}
		env := append(os.Environ(), "RESTIC_REPOSITORY="+filepath.Join(base, "restic"), "RESTIC_PASSWORD=bench", "RESTIC_CACHE_DIR="+filepath.Join(base, "restic-cache"))
		run := func(args ...string) {
			cmd := exec.Command("restic", append([]string{"--quiet"}, args...)...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("restic %v: %v\n%s", args, err, out)
			}
		}
		run("init")
		run("backup", "--host", "bench", src)
		b.SetBytes(total)
		i := 0
		for b.Loop() {
			target := filepath.Join(base, "restic-target"+strconv.Itoa(i))
			i++
			run("restore", "latest", "--target", target)
			b.StopTimer()
			if err := os.RemoveAll(target); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// rsBenchCorpus writes about size bytes under dir: 60% in large random
// binaries (8-32 MiB), 25% in small text files (1-64 KiB, 100 per
// directory), 15% in medium half-compressible files (0.1-2 MiB).
func rsBenchCorpus(b *testing.B, dir string, size int64) (files int, total int64) {
	b.Helper()
	seed := uint64(7)
	next := func(n int64) int64 { seed = seed*6364136223846793005 + 1442695040888963407; return int64(seed>>33) % n }
	write := func(p string, data []byte) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		files++
		total += int64(len(data))
	}
	for large := int64(0); large < size*60/100; {
		n := (8 << 20) + next(24<<20)
		data := make([]byte, n)
		rsRandom(data, uint64(files+1))
		write(filepath.Join(dir, "bin", fmt.Sprintf("blob%03d.bin", files)), data)
		large += n
	}
	text := []byte("func (r *Repository) LoadBlob(ctx context.Context, t blob.Tier) error { return nil }\n")
	for small := int64(0); small < size*25/100; {
		n := 1<<10 + next(63<<10)
		data := bytes.Repeat(text, int(n)/len(text)+1)[:n]
		rsRandom(data[:64], uint64(files)) // make each file distinct
		write(filepath.Join(dir, "src", fmt.Sprintf("pkg%03d", files/100), fmt.Sprintf("file%05d.go", files)), data)
		small += n
	}
	for medium := int64(0); medium < size*15/100; {
		n := 100<<10 + next(1900<<10)
		data := make([]byte, n)
		rsRandom(data[:n/2], uint64(files+1))
		copy(data[n/2:], bytes.Repeat(text, int(n)/len(text)+1))
		write(filepath.Join(dir, "assets", fmt.Sprintf("asset%04d.dat", files)), data)
		medium += n
	}
	return files, total
}
