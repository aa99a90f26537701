package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"lifeboat/checkpoint"
	"lifeboat/crypt"
	"lifeboat/prune"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// churn rewrites a share of the files of a writeTree tree with new content.
func churn(t *testing.T, dir string, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range 20 {
		if rng.IntN(4) != 0 {
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%d.txt", i))
		if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("churn %d %d\n", seed, rng.IntN(1e6)), 1+rng.IntN(4000))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("new%d.bin", seed)), big, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies a directory (regular files only) for later comparison.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), fi.Mode().Perm())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	// Copies get new times; align them so Compare looks at content and modes.
	_ = filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(src, p)
			_ = os.Chtimes(filepath.Join(dst, rel), fi.ModTime(), fi.ModTime())
		}
		return nil
	})
}

// history captures work four times with churn and keeps a copy of each version.
func (e *env) history(ws string, n int) (work string, versions []string, ids []string) {
	e.t.Helper()
	work = filepath.Join(e.dir, "work-"+ws)
	writeTree(e.t, work, 40)
	for i := range n {
		if i > 0 {
			churn(e.t, work, uint64(100+i))
		}
		v := filepath.Join(e.dir, fmt.Sprintf("v-%s-%d", ws, i))
		copyTree(e.t, work, v)
		versions = append(versions, v)
		ids = append(ids, e.capture(ws, work)["snapshot"].(string))
	}
	return work, versions, ids
}

// restoreID restores snapshot id and compares it with want.
func (e *env) restoreID(id, want string) {
	e.t.Helper()
	target := filepath.Join(e.t.TempDir(), "t")
	e.ok("restore", "--target", target, id)
	if d, err := compareContent(want, target); err != nil || d != "" {
		e.t.Fatalf("snapshot %s restored differs from %s: %s %v", id[:8], want, d, err)
	}
}

// compareContent compares file contents and names of two trees.
func compareContent(a, b string) (string, error) {
	diff := ""
	err := filepath.Walk(a, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		if fi.IsDir() {
			return nil
		}
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil || string(x) != string(y) {
			diff += rel + " "
		}
		return nil
	})
	return diff, err
}

func TestForgetAndPrune(t *testing.T) {
	e := newEnv(t)
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	_, versions, ids := e.history("w", 4)
	_, otherV, otherIDs := e.history("other", 1)

	// Dry run: reasons, nothing removed.
	lines := jsonLines(t, e.ok("forget", "--workspace", "w", "--keep-last", "2", "--dry-run", "--json").stdout)
	if len(lines) != 5 || lines[4]["message_type"] != "forget" || lines[4]["removed"].(float64) != 2 || lines[4]["dry_run"] != true {
		t.Fatalf("dry run: %v", lines)
	}
	if r := fmt.Sprint(lines[0]["reasons"]); lines[0]["id"] != ids[3] || r != "[last 2 last good root]" {
		t.Fatalf("newest: %v", lines[0])
	}
	if lines[3]["keep"] != false || fmt.Sprint(lines[3]["reasons"]) != "[]" {
		t.Fatalf("oldest: %v", lines[3])
	}
	if n := len(jsonLines(t, e.ok("snapshots", "--json").stdout)); n != 5 {
		t.Fatalf("dry run removed snapshots: %d left", n)
	}
	e.ok("forget", "--workspace", "w", "--keep-last", "2")
	if n := len(jsonLines(t, e.ok("snapshots", "--json").stdout)); n != 3 {
		t.Fatalf("%d snapshots after forget", n)
	}
	plan := jsonLines(t, e.ok("prune", "--instant-delete", "--dry-run", "--json", "--max-unused", "0%").stdout)
	if len(plan) != 1 || plan[0]["message_type"] != "prune_plan" || len(plan[0]["delete"].([]any))+len(plan[0]["repack"].([]any)) == 0 {
		t.Fatalf("plan %v", plan)
	}
	out := jsonLines(t, e.ok("prune", "--instant-delete", "--json", "--max-unused", "0%").stdout)
	st := out[len(out)-1]
	if st["message_type"] != "prune" || st["packs_deleted"].(float64) == 0 {
		t.Fatalf("prune: %v", st)
	}
	e.ok("check", "--read-data")
	e.restoreID(ids[2], versions[2])
	e.restoreID(ids[3], versions[3])
	e.restoreID(otherIDs[0], otherV[0])
	if r := e.run("restore", "--target", filepath.Join(e.dir, "gone"), ids[0]); r.code == 0 {
		t.Fatal("forgotten snapshot still restores")
	}
	// Nothing left to do.
	plan = jsonLines(t, e.ok("prune", "--instant-delete", "--dry-run", "--json", "--max-unused", "0%").stdout)
	if len(plan[0]["delete"].([]any))+len(plan[0]["repack"].([]any))+len(plan[0]["unindexed"].([]any)) != 0 {
		t.Fatalf("second plan not empty: %v", plan[0])
	}
}

func TestForgetPoliciesAndKeepNothing(t *testing.T) {
	e := newEnv(t)
	e.init()
	_, _, ids := e.history("w", 3)
	e.history("v", 2)
	// No flags and no stored policy: refused.
	if r := e.run("forget"); r.code != exitUsage || !strings.Contains(r.stderr, "policy set") {
		t.Fatalf("forget without policy: %d %s", r.code, r.stderr)
	}
	// A policy keeping nothing keeps the last good root and warns.
	r := e.ok("forget", "--workspace", "w", "--keep-last", "0", "--json")
	lines := jsonLines(t, r.stdout)
	sum := lines[len(lines)-1]
	if sum["kept"].(float64) != 1 || len(sum["warnings"].([]any)) != 1 || !strings.Contains(fmt.Sprint(sum["warnings"]), "keeps no snapshot") {
		t.Fatalf("summary %v", sum)
	}
	if lines[0]["id"] != ids[2] || fmt.Sprint(lines[0]["reasons"]) != "[last good root]" {
		t.Fatalf("kept %v", lines[0])
	}
	// Stored policy: applied by forget without flags; other workspaces untouched.
	e.ok("policy", "set", "--workspace", "v", "--keep-last", "1")
	pol := jsonLines(t, e.ok("policy", "show", "--json").stdout)
	if len(pol) != 1 || pol[0]["workspace"] != "v" || pol[0]["keep_last"].(float64) != 1 {
		t.Fatalf("policy show: %v", pol)
	}
	e.ok("policy", "set", "--workspace", "v", "--keep-last", "2") // replaces
	if pol := jsonLines(t, e.ok("policy", "show", "--json").stdout); len(pol) != 1 || pol[0]["keep_last"].(float64) != 2 {
		t.Fatalf("policy after replace: %v", pol)
	}
	e.ok("policy", "set", "--workspace", "v", "--keep-last", "1")
	e.ok("forget")
	snaps := jsonLines(t, e.ok("snapshots", "--json").stdout)
	count := map[string]int{}
	for _, s := range snaps {
		count[s["workspace"].(string)]++
	}
	if count["v"] != 1 || count["w"] != 1 {
		t.Fatalf("snapshots per workspace %v", count)
	}
	e.ok("policy", "remove", "--workspace", "v")
	if pol := jsonLines(t, e.ok("policy", "show", "--json").stdout); len(pol) != 0 {
		t.Fatalf("policy after remove: %v", pol)
	}
	if r := e.run("forget", "--keep-last", "-1"); r.code != exitUsage {
		t.Fatalf("negative keep: %d", r.code)
	}
}

// removeRootTreePack deletes the pack that holds the root tree of
// snapshot id (hex): the snapshot is damaged.
func (e *env) removeRootTreePack(id string) {
	e.t.Helper()
	r := e.openRepo()
	bid, err := blob.ParseID(id)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := snapshot.LoadManifest(e.t.Context(), r, bid)
	if err != nil {
		e.t.Fatal(err)
	}
	loc, ok, err := r.LookupBlob(blob.Workspace, blob.Tree, m.Root.Subtree[0])
	if err != nil || !ok {
		e.t.Fatal(ok, err)
	}
	if err := r.Backend().Remove(e.t.Context(), backend.Handle{Type: backend.Pack, Name: loc.Pack.String()}); err != nil {
		e.t.Fatal(err)
	}
}

// openRepo opens the env's repository in-process, as another process would.
func (e *env) openRepo() *repo.Repository {
	e.t.Helper()
	be, err := local.Open(e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := repo.Open(context.Background(), be, []byte(testPW), repo.Options{CacheDir: e.t.TempDir()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = r.Close(context.Background()); _ = be.Close() })
	return r
}

// captureGoodAndBad makes the repository and captures two workspaces of
// different trees, "good" and "bad" (the one a test then damages); it
// returns good's tree and bad's snapshot id.
func (e *env) captureGoodAndBad() (good, badID string) {
	e.t.Helper()
	e.init()
	good = e.captureTree("good", "good", 1)
	bad := filepath.Join(e.dir, "bad")
	writeTree(e.t, bad, 2)
	return good, e.capture("bad", bad)["snapshot"].(string)
}

func TestPruneDamagedSnapshot(t *testing.T) {
	e := newEnv(t)
	good, badID := e.captureGoodAndBad()
	e.removeRootTreePack(badID)
	res := e.run("prune", "--instant-delete")
	if res.code != exitCorrupt || !strings.Contains(res.stderr, badID) || !strings.Contains(res.stderr, "--forget-damaged") {
		t.Fatalf("prune with a damaged snapshot: exit %d\n%s", res.code, res.stderr)
	}
	plan := jsonLines(t, e.ok("prune", "--instant-delete", "--forget-damaged", "--json").stdout)
	if d := plan[0]["damaged"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != badID {
		t.Fatalf("damaged %v", d)
	}
	if r := e.run("snapshots", "--workspace", "bad", "--json"); r.stdout != "" {
		t.Fatalf("damaged snapshot not forgotten: %s", r.stdout)
	}
	e.ok("check", "--read-data") // the missing pack left the index with the snapshot
	e.restoreAndCompare("good", good)
}

// holdLock takes a lock in this process, as another lifeboat would.
func (e *env) holdLock(m repo.LockMode) *repo.Lock {
	e.t.Helper()
	r := e.openRepo()
	l, err := r.Lock(context.Background(), m, repo.LockOptions{Wait: -1, Refresh: -1, Command: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	return l
}

func TestLockExitCodes(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := e.captureTree("w", "src", 5)
	x := e.holdLock(repo.LockExclusive)
	// A capture takes no lock (two-phase prune): it goes on under an
	// exclusive lock. Restore takes a shared one and is refused, naming
	// the holder.
	e.ok("--lock-wait", "0", "capture", "--workspace", "w", src)
	r := e.run("--lock-wait", "0", "restore", "--target", filepath.Join(e.dir, "t0"), "--workspace", "w", "latest")
	if r.code != exitLocked || !strings.Contains(r.stderr, "PID "+strconv.Itoa(os.Getpid())) || !strings.Contains(r.stderr, "(test)") {
		t.Fatalf("restore under an exclusive lock: exit %d: %s", r.code, r.stderr)
	}
	if r := e.run("--json", "--lock-wait", "0", "restore", "--target", filepath.Join(e.dir, "t"), "--workspace", "w", "latest"); r.code != exitLocked || !strings.Contains(r.stderr, `"code":12`) {
		t.Fatalf("restore --json under an exclusive lock: exit %d: %s", r.code, r.stderr)
	}
	// unlock leaves a live lock; --force removes it.
	e.ok("unlock")
	if r := e.run("--lock-wait", "0", "restore", "--target", filepath.Join(e.dir, "t1"), "--workspace", "w", "latest"); r.code != exitLocked {
		t.Fatalf("unlock removed a live lock: %d", r.code)
	}
	e.ok("unlock", "--force")
	e.ok("--lock-wait", "0", "restore", "--target", filepath.Join(e.dir, "t2"), "--workspace", "w", "latest")
	if !errors.Is(x.Refresh(t.Context()), repo.ErrLockLost) {
		t.Fatal("forced-out holder not told")
	}
	// Two prunes: the second is refused while the first holds its prune lock.
	e.holdLock(repo.LockPrune)
	if r := e.run("--lock-wait", "0", "prune"); r.code != exitLocked || !strings.Contains(r.stderr, "prune lock") {
		t.Fatalf("second prune: exit %d: %s", r.code, r.stderr)
	}
	// Captures go on while a prune plans.
	e.ok("--lock-wait", "0", "capture", "--workspace", "w", src)
}

// TestKillPrune kills a real `lifeboat prune` after its Nth save, and
// after its Nth remove, for every N, each time from the same starting
// repository. After every crash the repository checks clean, every kept
// snapshot restores, and running prune again finishes the job (nothing left
// to delete, no leftovers: not the killed prune's scratch directory in
// TMPDIR either). The killed process's locks are stale (its PID is dead)
// and keep no one out.
func TestKillPrune(t *testing.T) {
	bin := lifeboatBinary(t)
	e := newEnv(t)
	tmp := pruneTempDir(t)
	leftover := 0
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	_, versions, ids := e.history("w", 4)
	e.ok("forget", "--keep-last", "2")
	start := filepath.Join(e.dir, "start")
	copyRepo(t, e.repo, start)
	for _, env := range []string{crashEnv, crashRemoveEnv} {
		crashes := 0
		for n := 1; ; n++ {
			copyRepo(t, start, e.repo)
			cmd := exec.Command(bin, "--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile, "prune", "--instant-delete", "--max-unused", "0%")
			cmd.Env = append(os.Environ(), env+"="+strconv.Itoa(n))
			out, err := cmd.CombinedOutput()
			if !killedByHook(t, fmt.Sprintf("%s=%d", env, n), out, err) {
				break // finished before the Nth operation: every point was crashed
			}
			crashes++
			leftover += len(pruneScratch(t, tmp))
			e.ok("check", "--read-data")
			e.restoreID(ids[2], versions[2])
			e.restoreID(ids[3], versions[3])
			e.ok("prune", "--instant-delete", "--max-unused", "0%")
			if left := pruneScratch(t, tmp); len(left) != 0 {
				t.Fatalf("%s=%d: after the finishing run, prune scratch directories left: %v", env, n, left)
			}
			plan := jsonLines(t, e.ok("prune", "--instant-delete", "--dry-run", "--json", "--max-unused", "0%").stdout)[0]
			if len(plan["delete"].([]any))+len(plan["repack"].([]any))+len(plan["unindexed"].([]any)) != 0 {
				t.Fatalf("%s=%d: after the finishing run, plan not empty: %v", env, n, plan)
			}
			res := jsonLines(t, e.ok("check", "--read-data", "--json").stdout)[0]
			if len(res["notices"].([]any)) != 0 {
				t.Fatalf("%s=%d: notices left: %v", env, n, res["notices"])
			}
			e.restoreID(ids[3], versions[3])
			locks := jsonLines(t, e.ok("unlock", "--list", "--json").stdout)
			for _, l := range locks {
				if l["stale"] == "" {
					t.Fatalf("%s=%d: lock left by a killed prune is not stale: %v", env, n, l)
				}
			}
		}
		if crashes < 5 {
			t.Fatalf("%s: only %d crash points", env, crashes)
		}
		t.Logf("%s: crashed at %d points", env, crashes)
	}
	if leftover == 0 {
		t.Fatal("no killed prune left its scratch directory: nothing showed that the next prune removes it")
	}
}

// pruneTempDir makes TMPDIR, for this test and the processes it starts,
// a new directory of the test, and returns it: the scratch directories
// of killed prunes stay there, not in the system's.
func pruneTempDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	return tmp
}

// pruneScratch lists the scratch directories of prunes in tmp.
func pruneScratch(t *testing.T, tmp string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(tmp, "lifeboat-prune-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// copyRepo makes dst (removed first) a copy of the repository directory src.
func copyRepo(t *testing.T, src, dst string) {
	t.Helper()
	must(t, os.RemoveAll(dst))
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
}

// TestCapturesWhilePruning runs captures of two workspaces and two prunes
// (each after a forget) at once, as separate processes, several rounds.
// Prunes (two-phase: they condemn, and take no lock captures wait for)
// run while captures run, and one prune waits for the other's prune lock. Afterwards the repository checks
// clean and the newest snapshot of each workspace restores exactly.
func TestCapturesWhilePruning(t *testing.T) {
	bin := lifeboatBinary(t)
	e := newEnv(t)
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	const rounds = 4
	workspaces := []string{"a", "b"}
	versions := map[string][]string{}
	for i, ws := range workspaces {
		work := filepath.Join(e.dir, "work-"+ws)
		writeTree(t, work, uint64(60+i))
		for r := range rounds {
			if r > 0 {
				churn(t, work, uint64(200+10*i+r))
			}
			v := filepath.Join(e.dir, fmt.Sprintf("v-%s-%d", ws, r))
			copyTree(t, work, v)
			versions[ws] = append(versions[ws], v)
		}
		e.capture(ws, versions[ws][0])
	}
	lifeboat := func(args ...string) error {
		full := append([]string{"--repo", e.repo, "--cache-dir", t.TempDir(), "--password-file", e.passwdFile, "--lock-wait", "2m"}, args...)
		out, err := exec.Command(bin, full...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("lifeboat %v: %v\n%s", args, err, out)
		}
		return nil
	}
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for _, ws := range workspaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r < rounds; r++ {
				if err := lifeboat("capture", "--workspace", ws, versions[ws][r]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds - 1 {
				if err := lifeboat("forget", "--keep-last", "1"); err != nil {
					errs <- err
					return
				}
				if err := lifeboat("prune", "--max-unused", strconv.Itoa(p*5)+"%"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	e.ok("check", "--read-data")
	for _, ws := range workspaces {
		target := filepath.Join(t.TempDir(), "t")
		e.ok("restore", "--workspace", ws, "--target", target, "latest")
		if d, err := compareContent(versions[ws][rounds-1], target); err != nil || d != "" {
			t.Fatalf("workspace %s: latest differs: %s %v", ws, d, err)
		}
	}
	e.ok("prune")
	e.ok("check", "--read-data")
}

type countMarker struct {
	trees, data int
	seen        map[blob.ID]bool
}

func (m *countMarker) Seen(_ blob.Tier, id blob.ID) (bool, error) { return m.seen[id], nil }
func (m *countMarker) Add(_ blob.Tier, typ blob.Type, id blob.ID) error {
	if typ == blob.Tree {
		m.trees++
		m.seen[id] = true
	} else {
		m.data++
	}
	return nil
}

// The source prune uses walks both levels, reads each tree once, and
// treats a snapshot forgotten since it was listed as reaching nothing.
func TestSnapshotSourceReach(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := filepath.Join(e.dir, "src")
	writeTree(t, src, 9)
	a := e.capture("w", src)["snapshot"].(string)
	b := e.capture("w", src, "--force")["snapshot"].(string)
	r := e.openRepo()
	s := snapshot.PruneSource{Repo: r}
	ids, err := s.Snapshots(t.Context())
	if err != nil || len(ids) != 2 {
		t.Fatal(ids, err)
	}
	m := &countMarker{seen: map[blob.ID]bool{}}
	for _, ref := range []string{a, b} {
		id, _ := blob.ParseID(ref)
		if err := s.Reach(t.Context(), id, m); err != nil {
			t.Fatal(err)
		}
	}
	// writeTree makes 5 directories (root, d0-d3) and 21 files with one
	// chunk each but big.bin (3 MiB: several chunks); b shares every tree.
	if m.trees != 5 || m.data < 22 {
		t.Fatalf("marked %d trees, %d chunks", m.trees, m.data)
	}
	if err := s.Reach(t.Context(), blob.ID{1, 2, 3}, m); err != nil {
		t.Fatalf("a forgotten snapshot: %v", err)
	}
}

// A snapshot forget decided to remove that another forget (both hold
// shared locks) removed first is gone, as wanted: not an error.
func TestForgetSnapshotGoneMeanwhile(t *testing.T) {
	e := newEnv(t)
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	_, _, ids := e.history("w", 2)
	r := e.openRepo()
	ctx := context.Background()
	l, err := r.Lock(ctx, repo.LockShared, repo.LockOptions{Wait: -1, Refresh: -1, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	old, err := blob.ParseID(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveObject(ctx, crypt.KindSnapshot, old); err != nil { // the other forget
		t.Fatal(err)
	}
	res := checkpoint.ForgetResult{Decisions: []prune.Decision{{Snapshot: prune.Snapshot{ID: old, Workspace: "w"}}}, Removed: 1}
	if err := checkpoint.RemovePlanned(ctx, r, l, repo.LockOptions{Wait: -1, Refresh: -1}, &res); err != nil || res.Removed != 1 {
		t.Fatalf("forgetting a snapshot removed meanwhile: %v, %+v", err, res)
	}
}

// prune's JSON lists are [] when empty, never null (json.md), in the
// default two-phase run and with --instant-delete, dry run or not.
func TestPruneJSONListsNeverNull(t *testing.T) {
	e := newEnv(t)
	e.init()
	e.captureTree("w", "src", 2)
	for _, args := range [][]string{{"--dry-run"}, {}, {"--instant-delete", "--dry-run"}, {"--instant-delete"}} {
		out := e.ok(append([]string{"prune", "--json"}, args...)...).stdout
		if strings.Contains(out, "null") {
			t.Fatalf("prune %v printed null:\n%s", args, out)
		}
		plan := jsonLines(t, out)[0]
		for _, k := range []string{"damaged", "delete", "repack", "unindexed"} {
			if l, ok := plan[k].([]any); !ok || len(l) != 0 {
				t.Fatalf("prune %v: %s is %v, want []", args, k, plan[k])
			}
		}
	}
}

// With --config, prune takes [prune] delete_after and max_unused where
// the flags are not given; a flag still wins.
func TestPruneTakesConfigKeys(t *testing.T) {
	e := newEnv(t)
	e.init()
	// The first snapshot's pack holds one file the second has not: after
	// the first is forgotten, a little of that pack is unused.
	src := filepath.Join(e.dir, "src")
	writeTree(t, src, 2)
	must(t, os.WriteFile(filepath.Join(src, "gone.txt"), bytes.Repeat([]byte("one small file of many "), 200), 0o644))
	e.capture("w", src)
	must(t, os.Remove(filepath.Join(src, "gone.txt")))
	e.capture("w", src)
	cfg := filepath.Join(e.dir, "lifeboat.toml")
	head := serveConfig{repo: e.repo, passwordFile: e.passwdFile, cache: e.cache, state: filepath.Join(e.dir, "state"), tokens: filepath.Join(e.dir, "tokens")}.head()
	must(t, os.WriteFile(filepath.Join(e.dir, "tokens"), nil, 0o600))
	must(t, os.WriteFile(cfg, []byte(head+"\n[prune]\ndelete_after = \"13h10m\"\nmax_unused = \"0%\"\n"), 0o600))
	e.ok("forget", "--workspace", "w", "--keep-last", "1")
	repacks := func(args ...string) int {
		return len(jsonLines(t, e.ok(append(args, "prune", "--dry-run", "--json")...).stdout)[0]["repack"].([]any))
	}
	if def, fromCfg := repacks(), repacks("--config", cfg); def != 0 || fromCfg == 0 {
		t.Fatalf("packs to repack: %d with the default 5%%, %d with max_unused 0%% from the config", def, fromCfg)
	}
	if out := e.ok("--config", cfg, "prune").stdout; !strings.Contains(out, "13h10m0s from now") {
		t.Fatalf("prune --config did not take delete_after:\n%s", out)
	}
	if out := e.ok("--config", cfg, "prune", "--delete-after", "20h").stdout; !strings.Contains(out, "20h0m0s from now") {
		t.Fatalf("--delete-after did not win over the config:\n%s", out)
	}
	// Too short in the file: the message names the key, not the flag.
	short := filepath.Join(e.dir, "short.toml")
	must(t, os.WriteFile(short, []byte(head+"\n[prune]\ndelete_after = \"1h\"\n"), 0o600))
	if r := e.run("--config", short, "prune"); r.code != exitUsage || !strings.Contains(r.stderr, "[prune] delete_after 1h0m0s: want at least") {
		t.Fatalf("a delete_after below the minimum in the config: exit %d: %s", r.code, r.stderr)
	}
}
