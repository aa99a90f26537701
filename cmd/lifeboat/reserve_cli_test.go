package main

import (
	"errors"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"lifeboat/internal/nstest"
	"lifeboat/repo"
)

// TestReserveFreesAFullDisk: a repository and its local cache on a small
// real disk (tmpfs), with a reserve of one block, two snapshots, and the rest of the disk
// filled. forget cannot even take its lock (exit 17); `reserve --free`
// releases the block (writing nothing); forget and prune then free the
// older snapshot's data, the reserve is set again, check finds nothing
// wrong and the kept snapshot restores identical. A reserve larger than
// the disk keeps the blocks that fit.
func TestReserveFreesAFullDisk(t *testing.T) {
	disk := nstest.Tmpfs(t, "size=48m,mode=0700")
	e := newEnv(t)
	e.repo, e.cache = filepath.Join(disk, "repo"), filepath.Join(disk, "cache") // one disk, as with ~/.local and ~/.cache
	e.init()
	block := "--mib=" + strconv.Itoa(repo.ReserveBlockSize>>20)
	if got := e.reserve(block); got.Blocks != 1 || got.Bytes != repo.ReserveBlockSize {
		t.Fatalf("reserve of one block: %+v", got)
	}
	seed := uint64(11)
	t.Logf("files: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	work := filepath.Join(e.dir, "work")
	writeRandomFiles(t, rng, work, "old", 1, 8<<20)
	e.capture("w", work)
	must(t, os.RemoveAll(work))
	writeRandomFiles(t, rng, work, "new", 1, 8<<20)
	e.capture("w", work)
	fillUntilFull(t, filepath.Join(disk, "filler"))

	if r := e.run("forget", "--keep-last", "1"); r.code != exitNoSpace || !strings.Contains(r.stderr, "no space left") {
		t.Fatalf("forget on the full disk: exit %d, %s", r.code, r.stderr)
	}
	before := filesUnder(t, disk)
	if got := e.reserve("--free"); got.Blocks != 0 || got.Bytes != 0 {
		t.Fatalf("reserve after --free: %+v", got)
	}
	for p := range filesUnder(t, disk) {
		if !before[p] {
			t.Fatalf("--free on the full disk wrote %s", p)
		}
		delete(before, p)
	}
	if len(before) != 1 || !strings.HasPrefix(slices.Collect(maps.Keys(before))[0], "repo/reserve/") {
		t.Fatalf("--free removed %v; want the reserve's one block and nothing else", before)
	}
	e.ok("forget", "--keep-last", "1")
	e.ok("prune", "--instant-delete")
	if got := e.reserve(block); got.Blocks != 1 {
		t.Fatalf("reserve set again after the prune: %+v", got)
	}
	e.ok("check")
	e.restoreAndCompare("w", work)

	// More than the disk holds: the blocks that fit stay, and the error
	// says how many.
	if r := e.run("reserve", "--mib=1024"); r.code != exitNoSpace || !strings.Contains(r.stderr, "the reserve now holds") {
		t.Fatalf("reserve beyond the disk: exit %d, %s", r.code, r.stderr)
	}
	if got := e.reserve(); got.Blocks < 1 || got.Blocks >= 64 {
		t.Fatalf("reserve after growing past the disk: %+v", got)
	}
	if tmp, err := os.ReadDir(filepath.Join(e.repo, "tmp")); err != nil || len(tmp) != 0 {
		t.Fatalf("temp files left by the reserve that did not fit: %v %v", tmp, err)
	}
	e.ok("check")
}

// TestReserveRefusesBadFlags: --mib below 0 or above 1 PiB, and --mib
// with --free, are usage errors that change nothing.
func TestReserveRefusesBadFlags(t *testing.T) {
	e := newEnv(t)
	e.init()
	e.reserve("--mib=1")
	for _, args := range [][]string{{"reserve", "--mib=-1"}, {"reserve", "--mib=1", "--free"}, {"reserve", "--mib=17592186044416"}} {
		if r := e.run(args...); r.code != exitUsage || !strings.Contains(r.stderr, "--mib") {
			t.Errorf("lifeboat %v: exit %d, %s", args, r.code, r.stderr)
		}
	}
	if got := e.reserve(); got.Blocks != 1 {
		t.Fatalf("reserve after the refused commands: %+v", got)
	}
}

// reserve runs `lifeboat reserve` with args and returns what it reports.
func (e *env) reserve(args ...string) repo.Reserved {
	e.t.Helper()
	lines := jsonLines(e.t, e.ok(append([]string{"--json", "reserve"}, args...)...).stdout)
	if len(lines) != 1 || lines[0]["message_type"] != "reserve" {
		e.t.Fatalf("reserve %v printed %v", args, lines)
	}
	return repo.Reserved{Blocks: int(lines[0]["blocks"].(float64)), Bytes: int64(lines[0]["bytes"].(float64))}
}

// filesUnder returns the paths of the regular files under dir, relative
// to it.
func filesUnder(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files := map[string]bool{}
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = true
		}
		return err
	}))
	return files
}

// fillUntilFull writes the file at path until its disk has no byte left.
func fillUntilFull(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := len(buf); n >= 512; {
		if _, err := f.Write(buf[:n]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			n /= 2
		}
	}
}
