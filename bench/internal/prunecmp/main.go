// Command prunecmp times `lifeboat prune` against `restic prune` on the
// same corpus and history: a bench.Generate workspace captured N times
// (bench.Churn plus a rewrite of 5% of the binary between captures), then
// forget all but the last K, then prune. Each trial starts both tools from
// copies of the same repositories and caches; the tools alternate which
// goes first. Time and peak RSS come from /usr/bin/time -v.
//
//	go build -o /tmp/lifeboat ./cmd/lifeboat
//	go run ./bench/internal/prunecmp -lifeboat /tmp/lifeboat -dir /tmp/prunecmp
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"lifeboat/bench"
)

var (
	lifeboat = flag.String("lifeboat", "lifeboat", "lifeboat binary")
	restic   = flag.String("restic", "/usr/bin/restic", "restic binary")
	dir      = flag.String("dir", "/tmp/prunecmp", "work directory (emptied)")
	captures = flag.Int("captures", 20, "captures")
	keep     = flag.Int("keep", 5, "snapshots kept by forget")
	trials   = flag.Int("trials", 3, "prune trials per tool")
	binMiB   = flag.Int("binary-mib", 64, "size of the corpus's binary file")
	srcFiles = flag.Int("source-files", 4000, "source files in the corpus")
	kdfKiB   = flag.Int("kdf-memory-kib", 0, "argon2id memory of lifeboat's key (0: lifeboat's default, 48 MiB; restic's scrypt key uses 32 MiB)")
)

const password = "prunecmp-password"

func run(env []string, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// rewriteBinary overwrites 5% of the file at a random offset.
func rewriteBinary(path string, seed uint64) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	rng := rand.New(rand.NewPCG(seed, 5))
	n := fi.Size() / 20
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	if _, err := f.WriteAt(b, rng.Int64N(fi.Size()-n)); err != nil {
		log.Fatal(err)
	}
}

type measure struct {
	secs float64
	rss  int64 // KiB
}

// timed runs a command under /usr/bin/time -v.
func timed(env []string, name string, args ...string) measure {
	out := run(env, "/usr/bin/time", append([]string{"-v", name}, args...)...)
	var m measure
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "Maximum resident set size (kbytes): "); ok {
			m.rss, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "Elapsed (wall clock) time (h:mm:ss or m:ss): "); ok {
			parts := strings.Split(v, ":")
			for _, p := range parts {
				f, _ := strconv.ParseFloat(p, 64)
				m.secs = m.secs*60 + f
			}
		}
	}
	return m
}

func main() {
	flag.Parse()
	must(os.RemoveAll(*dir))
	work := filepath.Join(*dir, "work")
	lbRepo, lbCache := filepath.Join(*dir, "lb-repo"), filepath.Join(*dir, "lb-cache")
	rsRepo, rsCache := filepath.Join(*dir, "restic-repo"), filepath.Join(*dir, "restic-cache")
	must(bench.Generate(work, 1, bench.Scale{SourceFiles: *srcFiles, DepFiles: 2 * *srcFiles, BinaryMiB: *binMiB, LogKiB: 2048}))
	lbEnv := []string{"LIFEBOAT_REPO=" + lbRepo, "LIFEBOAT_CACHE_DIR=" + lbCache, "LIFEBOAT_PASSWORD=" + password}
	rsEnv := []string{"RESTIC_REPOSITORY=" + rsRepo, "RESTIC_CACHE_DIR=" + rsCache, "RESTIC_PASSWORD=" + password}
	initArgs := []string{"init"}
	if *kdfKiB > 0 {
		initArgs = append(initArgs, "--kdf-memory-kib", strconv.Itoa(*kdfKiB))
	}
	run(lbEnv, *lifeboat, initArgs...)
	run(rsEnv, *restic, "init")
	binary := filepath.Join(work, "models", "weights.bin")
	start := time.Now()
	for i := range *captures {
		if i > 0 {
			if _, err := bench.Churn(work, uint64(i)); err != nil {
				log.Fatal(err)
			}
			rewriteBinary(binary, uint64(i))
		}
		run(lbEnv, *lifeboat, "capture", "--workspace", "w", work)
		run(rsEnv, *restic, "backup", "--host", "h", "-q", work)
	}
	fmt.Printf("history: %d captures in %.0fs\n", *captures, time.Since(start).Seconds())
	run(lbEnv, *lifeboat, "forget", "--keep-last", strconv.Itoa(*keep))
	run(rsEnv, *restic, "forget", "--keep-last", strconv.Itoa(*keep))
	for _, p := range []string{lbRepo, lbCache, rsRepo, rsCache} {
		run(nil, "cp", "-a", p, p+".start")
	}
	reset := func(paths ...string) {
		for _, p := range paths {
			must(os.RemoveAll(p))
			run(nil, "cp", "-a", p+".start", p)
		}
	}
	var lb, rs []measure
	for t := range *trials {
		reset(lbRepo, lbCache, rsRepo, rsCache)
		first := t%2 == 0
		for k := range 2 {
			if (k == 0) == first {
				lb = append(lb, timed(lbEnv, *lifeboat, "prune"))
			} else {
				rs = append(rs, timed(rsEnv, *restic, "prune"))
			}
		}
	}
	size := func(p string) string { return strings.Fields(run(nil, "du", "-sh", p))[0] }
	fmt.Printf("after prune: lifeboat %s, restic %s (before: %s, %s)\n", size(lbRepo), size(rsRepo), size(lbRepo+".start"), size(rsRepo+".start"))
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "| trial | lifeboat prune | restic prune | restic / lifeboat time | lifeboat / restic peak RSS |\n|---|---|---|---|---|\n")
	for i := range lb {
		fmt.Fprintf(&buf, "| %d | %.2f s, %d MiB | %.2f s, %d MiB | %.2fx | %.2f |\n", i+1, lb[i].secs, lb[i].rss>>10, rs[i].secs, rs[i].rss>>10,
			rs[i].secs/lb[i].secs, float64(lb[i].rss)/float64(rs[i].rss))
	}
	fmt.Print(buf.String())
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
