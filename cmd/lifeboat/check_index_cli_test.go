package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/internal/seedtest"
)

// indexFiles reads every index object of the env's repository: name -> bytes.
func (e *env) indexFiles() map[string][]byte {
	e.t.Helper()
	paths, err := filepath.Glob(filepath.Join(e.repo, "index", "*"))
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			e.t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	if len(out) == 0 {
		e.t.Fatal("the repository has no index objects")
	}
	return out
}

// checkReport runs check --json with args and returns its exit code and
// the check message's problems and notices.
func (e *env) checkReport(args ...string) (code int, problems, notices []map[string]any) {
	e.t.Helper()
	r := e.run(append([]string{"check", "--json"}, args...)...)
	for _, m := range jsonLines(e.t, r.stdout) {
		if m["message_type"] != "check" {
			continue
		}
		for _, p := range m["problems"].([]any) {
			problems = append(problems, p.(map[string]any))
		}
		for _, p := range m["notices"].([]any) {
			notices = append(notices, p.(map[string]any))
		}
	}
	return r.code, problems, notices
}

// check reads index objects from the repository, not the local index
// cache: with the cache warm (every index object applied), an index object
// flipped at any byte or truncated is not "no problems found", exit 0.
// check loads and authenticates every index object from the
// repository on every run, with or without --read-data, and names the
// damaged one (index_damaged, exit 13); put back intact, it is clean again.
func TestCheckIndexDamagedWithWarmCache(t *testing.T) {
	e := newEnv(t)
	e.init()
	work := filepath.Join(e.dir, "work")
	writeTree(t, work, 31)
	e.capture("w", work)
	other := filepath.Join(e.dir, "other")
	writeTree(t, other, 32)
	e.capture("other", other)
	e.ok("check") // the cache is warm: every index object is applied

	rng := seedtest.Rand(t)
	files := e.indexFiles()
	var names []string
	for name := range files {
		names = append(names, name)
	}
	type damage struct {
		what string
		do   func(b []byte) []byte
	}
	flip := func(i int) func([]byte) []byte {
		return func(b []byte) []byte { b = bytes.Clone(b); b[i%len(b)] ^= 1 << rng.IntN(8); return b }
	}
	var cases []damage
	for range 3 {
		i := rng.IntN(1 << 20)
		cases = append(cases, damage{"a random byte flipped", flip(i)})
	}
	cases = append(cases,
		damage{"first byte flipped", flip(0)},
		damage{"last byte flipped", func(b []byte) []byte { return flip(len(b) - 1)(b) }},
		damage{"truncated by one byte", func(b []byte) []byte { return b[:len(b)-1] }},
		damage{"truncated at random", func(b []byte) []byte { return b[:rng.IntN(len(b))] }},
		damage{"emptied", func([]byte) []byte { return nil }},
	)
	for i, c := range cases {
		name := names[i%len(names)]
		path := filepath.Join(e.repo, "index", name)
		for _, args := range [][]string{nil, {"--read-data"}} {
			if err := os.WriteFile(path, c.do(files[name]), 0o600); err != nil {
				t.Fatal(err)
			}
			code, problems, _ := e.checkReport(args...)
			named := false
			for _, p := range problems {
				named = named || (p["kind"] == "index_damaged" && p["object"] == "index/"+name)
			}
			if code != exitCorrupt || !named {
				t.Fatalf("index/%s %s, check %v with a warm cache: exit %d, problems %v; want exit %d naming it as index_damaged",
					name[:8], c.what, args, code, problems, exitCorrupt)
			}
			// The human output names it too, and the way out.
			r := e.run(append([]string{"check"}, args...)...)
			if r.code != exitCorrupt || !strings.Contains(r.stdout, "index_damaged index/"+name) || !strings.Contains(r.stdout, "lifeboat repair index") {
				t.Fatalf("index/%s %s: check %v printed (exit %d):\n%s%s", name[:8], c.what, args, r.code, r.stdout, r.stderr)
			}
			// Put back intact: clean again, and the snapshots restore.
			if err := os.WriteFile(path, files[name], 0o600); err != nil {
				t.Fatal(err)
			}
			if code, problems, _ := e.checkReport(args...); code != 0 || len(problems) != 0 {
				t.Fatalf("index/%s put back intact: check %v exit %d, problems %v", name[:8], args, code, problems)
			}
		}
	}
	e.restoreAndCompare("w", work)
	e.restoreAndCompare("other", other)
}

// writeRandomFiles writes n files of size random bytes under dir (spread
// over a few directories), named with prefix.
func writeRandomFiles(t *testing.T, rng *rand.Rand, dir, prefix string, n, size int) {
	t.Helper()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%3), fmt.Sprintf("%s%02d.bin", prefix, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Index objects a prune deleted, put back (an attacker, a stale
// object-store listing, an old backup of the repository), name packs the
// prune had deleted; the stale places must not win over the live ones,
// or restores of intact snapshots fail with "pack named by the index is
// missing". Here the first capture's data packs hold chunks of files
// the second capture keeps and of files it lost, so the prune repacks
// them: the put-back objects place live chunks in deleted packs. Now a
// place in a pack that is not stored never takes a blob over, so every
// kept snapshot restores, with the cache warm or rebuilt; check names the
// stale index objects but no snapshot as damaged; and the next prune
// removes them without losing anything (had the stale places won, it
// would have deleted the repacked copies as unused).
func TestReplayedIndexObjectsAfterPrune(t *testing.T) {
	e := newEnv(t)
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	rng := seedtest.Rand(t)
	work := filepath.Join(e.dir, "work")
	writeRandomFiles(t, rng, work, "keep", 20, 20<<10)
	writeRandomFiles(t, rng, work, "lose", 20, 20<<10)
	e.capture("w", work)
	for i := range 20 {
		if err := os.Remove(filepath.Join(work, fmt.Sprintf("d%d", i%3), fmt.Sprintf("lose%02d.bin", i))); err != nil {
			t.Fatal(err)
		}
	}
	writeRandomFiles(t, rng, work, "new", 5, 20<<10)
	kept := filepath.Join(e.dir, "kept")
	copyTree(t, work, kept)
	second := e.capture("w", work)["snapshot"].(string)
	other := filepath.Join(e.dir, "other")
	writeTree(t, other, 61)
	otherID := e.capture("other", other)["snapshot"].(string)
	before := e.indexFiles()

	e.ok("forget", "--workspace", "w", "--keep-last", "1")
	out := jsonLines(t, e.ok("prune", "--instant-delete", "--json", "--max-unused", "0%").stdout)
	st := out[len(out)-1]
	if st["index_removed"].(float64) == 0 || st["blobs_copied"].(float64) == 0 {
		t.Fatalf("the prune replaced no index object or repacked nothing: %v", st)
	}
	after := e.indexFiles()
	var replayed []string
	for name, b := range before {
		if _, ok := after[name]; !ok {
			replayed = append(replayed, name)
			if err := os.WriteFile(filepath.Join(e.repo, "index", name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("put back %d index objects the prune deleted", len(replayed))

	restoreAll := func(when string) {
		t.Helper()
		t.Logf("restoring every kept snapshot %s", when)
		e.restoreID(second, kept)
		e.restoreID(otherID, other)
	}
	checkNamesReplay := func(when string) {
		t.Helper()
		code, problems, notices := e.checkReport("--read-data")
		if code != 0 && code != exitCorrupt {
			t.Fatalf("check %s: exit %d", when, code)
		}
		stale := 0
		for _, p := range append(problems, notices...) {
			kind, detail := p["kind"].(string), p["detail"].(string)
			switch kind {
			case "pack_missing", "index_stale":
				stale++
				if !mentionsAny(detail+" "+p["object"].(string), replayed) {
					t.Errorf("check %s: %s %s does not name a put-back index object: %s", when, kind, p["object"], detail)
				}
			case "pack_unindexed", "index_cache_rebuilt":
			default:
				t.Errorf("check %s: %s %s: %s (an intact snapshot or pack reported damaged)", when, kind, p["object"], detail)
			}
		}
		if stale == 0 {
			t.Errorf("check %s does not report the put-back index objects (problems %v, notices %v)", when, problems, notices)
		}
		if (code == exitCorrupt) != (len(problems) > 0) {
			t.Errorf("check %s: exit %d with problems %v", when, code, problems)
		}
	}
	// The cache synced before the objects came back: they are new to it,
	// and applied after the live ones.
	restoreAll("with the cache warm")
	checkNamesReplay("with the cache warm")
	// A cache rebuilt from scratch applies them in id order, mixed with the live ones.
	if err := os.RemoveAll(e.cache); err != nil {
		t.Fatal(err)
	}
	restoreAll("with the cache rebuilt")
	checkNamesReplay("with the cache rebuilt")

	// The next prune removes the stale objects and keeps every snapshot.
	e.ok("prune", "--instant-delete", "--max-unused", "0%")
	if code, problems, _ := e.checkReport("--read-data"); code != 0 || len(problems) != 0 {
		t.Fatalf("check after the second prune: exit %d, problems %v", code, problems)
	}
	for _, name := range replayed {
		if _, err := os.Stat(filepath.Join(e.repo, "index", name)); err == nil {
			t.Errorf("index/%s, put back, survived the second prune", name[:8])
		}
	}
	restoreAll("after the second prune")
	if err := os.RemoveAll(e.cache); err != nil {
		t.Fatal(err)
	}
	restoreAll("after the second prune, the cache rebuilt")
}

// mentionsAny reports whether s names one of the index objects names.
func mentionsAny(s string, names []string) bool {
	for _, n := range names {
		if strings.Contains(s, n) {
			return true
		}
	}
	return false
}
