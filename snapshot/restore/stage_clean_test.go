package restore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/backend/local"
	"lifeboat/internal/proctest"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// A killed restore's .lifeboat-restore-* staging directory beside the
// target does not stay there for good: a later restore of the target (or
// `lifeboat unlock`) removes it.

// rsKillEnv carries the arguments of TestRestoreKilledChild.
const rsKillEnv = "LIFEBOAT_TEST_RESTORE_KILL_CHILD"

// rsKilledRestore starts a restore of m into target in a child process
// (TestRestoreKilledChild) that stops at point ("files": once the staging
// tree has files; "switch": in the two-step switch, right after the target
// was moved aside) and waits there; the test then stops it (SIGSTOP,
// waited for, so no thread of it changes anything any more while it
// keeps its lock). It returns the staging directory (with the point
// reached) and a kill function that ends the child with SIGKILL and waits
// for it.
func rsKilledRestore(t *testing.T, r *snaptest.Repo, m *snapshot.Manifest, target, records, point string) (staging string, kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestoreKilledChild$", "-test.count=1")
	// The child's repository cache belongs to this test: the child is
	// killed, so a t.TempDir of its own would stay for good.
	cache := t.TempDir()
	cmd.Env = append(os.Environ(), rsKillEnv+"="+strings.Join([]string{r.Path, m.ID.String(), target, records, point, cache}, "\n"))
	out := proctest.StartChild(t, cmd)
	killed := false
	kill = func() {
		if killed {
			return
		}
		killed = true
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Cleanup(kill)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), point+" "); ok {
			if err := cmd.Process.Signal(unix.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			var info unix.Siginfo
			if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil); err != nil {
				t.Fatal(err)
			}
			return p, kill
		}
	}
	kill()
	t.Fatalf("the restore child never reached %q", point)
	return "", nil
}

// TestRestoreKilledChild is the child of rsKilledRestore.
func TestRestoreKilledChild(t *testing.T) {
	t.Parallel()
	args := strings.Split(proctest.ChildEnv(t, rsKillEnv, "a killed-restore test"), "\n")
	repoDir, id, target, records, point, cache := args[0], args[1], args[2], args[3], args[4], args[5]
	ctx := context.Background()
	be, err := local.Open(repoDir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, be, snaptest.Password, repo.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshot.Find(ctx, r, id, "")
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			names, _ := filepath.Glob(filepath.Join(filepath.Dir(target), stagePrefix+"*"))
			fmt.Println(point, strings.Join(names, " "))
		})
		select {} // killed here
	}
	o := Options{Target: target, Replace: point == "switch", Records: records, Workers: 1}
	switch point {
	case "files":
		o.Progress = &rsProgress{onDone: stop}
	case "switch":
		o.hooks = &stageHooks{
			renameat2: func(int, string, int, string, uint) error { return unix.EINVAL },
			renameat: func(ofd int, op string, nfd int, np string) error {
				err := unix.Renameat(ofd, op, nfd, np)
				if strings.HasPrefix(np, stageOldPre) {
					stop()
				}
				return err
			},
		}
	}
	_, err = Run(ctx, r, m, o)
	t.Fatalf("restore ended (%v) without reaching %q", err, point)
}

// TestKilledRestoreStagingRemoved: a restore killed with SIGKILL while it
// writes leaves its staging directory. While the restore still runs, no
// clean-up touches it (its lock is held): not a CleanStaging of the
// directory, not CleanRecordedStaging, not another restore into the same
// directory. Once it is killed, the next restore of the target removes
// it, says so, and restores; and CleanRecordedStaging (`lifeboat unlock`)
// removes what another killed restore left, with its record.
func TestKilledRestoreStagingRemoved(t *testing.T) {
	t.Parallel()
	r, m, want := rsMixedRepo(t, 6, 3000)
	parent, records := t.TempDir(), t.TempDir()
	target := filepath.Join(parent, "t")

	staging, kill := rsKilledRestore(t, r, m, target, records, "files")
	if filepath.Dir(staging) != parent || !strings.HasPrefix(filepath.Base(staging), stagePrefix) {
		t.Fatalf("staging %q", staging)
	}
	before := snaptest.Dump(t, staging, true)
	found, err := CleanStaging(parent)
	if err != nil || len(found) != 1 || found[0].Path != staging || found[0].Removed || found[0].Why != stagingInUse {
		t.Fatalf("clean-up during the restore: %+v %v", found, err)
	}
	found, err = CleanRecordedStaging(records)
	if err != nil || len(found) != 1 || found[0].Path != staging || found[0].Removed {
		t.Fatalf("recorded clean-up during the restore: %+v %v", found, err)
	}
	other := filepath.Join(parent, "other")
	res, err := Run(t.Context(), r.Repository, m, Options{Target: other})
	if err != nil || len(res.Cleaned) != 1 || res.Cleaned[0].Removed {
		t.Fatalf("a restore beside a running one: %+v %v", res.Cleaned, err)
	}
	if after := snaptest.Dump(t, staging, true); after != before {
		t.Fatalf("the running restore's staging changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	kill()
	if _, err := os.Stat(staging); err != nil {
		t.Fatalf("the killed restore left no staging directory: %v", err)
	}
	if recs, _ := os.ReadDir(records); len(recs) != 1 {
		t.Fatalf("records of the killed restore: %v", recs)
	}
	res, err = Run(t.Context(), r.Repository, m, Options{Target: target, Records: records})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cleaned) != 1 || res.Cleaned[0].Path != staging || !res.Cleaned[0].Removed {
		t.Errorf("the next restore found %+v, want %s removed", res.Cleaned, staging)
	}
	rsCheckFiles(t, target, want)
	rsNoLeftovers(t, parent)

	// Another killed restore, cleaned through its record.
	target2 := filepath.Join(parent, "t2")
	staging, kill = rsKilledRestore(t, r, m, target2, records, "files")
	kill()
	found, err = CleanRecordedStaging(records)
	if err != nil || len(found) != 1 || found[0].Path != staging || !found[0].Removed {
		t.Fatalf("recorded clean-up after the kill: %+v %v", found, err)
	}
	rsNoLeftovers(t, parent)
	// The first killed restore's record went with the restore that
	// removed its staging directory; this one's with the clean-up.
	if recs, _ := os.ReadDir(records); len(recs) != 0 {
		t.Errorf("records left: %v", recs)
	}
	if _, err := os.Stat(target2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed restore's target exists: %v", err)
	}
}

// TestKilledSwitchPairKept: a restore killed inside the two-step switch,
// after the target was moved aside and before the new tree took its name,
// leaves the pair .lifeboat-restore-<hex> (complete) and
// .lifeboat-old-<hex> with no target. A clean-up removes neither and says
// which is which; once the user renamed one to the target, the other is
// removed by the next clean-up.
func TestKilledSwitchPairKept(t *testing.T) {
	t.Parallel()
	r, m, want := rsMixedRepo(t, 6, 3000)
	parent := t.TempDir()
	target, _ := rsOldTarget(t, parent)
	oldDump := snaptest.Dump(t, target, true)
	staging, kill := rsKilledRestore(t, r, m, target, "", "switch")
	kill()
	old := filepath.Join(parent, stageOldPre+strings.TrimPrefix(filepath.Base(staging), stagePrefix))
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("target after a kill inside the switch: %v", err)
	}
	for range 2 { // a clean-up, then a restore's
		found, err := CleanStaging(parent)
		if err != nil || len(found) != 2 {
			t.Fatalf("clean-up: %+v %v", found, err)
		}
		for _, f := range found {
			if f.Removed || !strings.Contains(f.Why, "interrupted inside its switch") || !strings.Contains(f.Why, staging) || !strings.Contains(f.Why, old) {
				t.Errorf("%s: %+v", f.Path, f)
			}
		}
	}
	other := filepath.Join(parent, "other")
	if res, err := Run(t.Context(), r.Repository, m, Options{Target: other}); err != nil || len(res.Cleaned) != 2 {
		t.Fatalf("restore beside the pair: %+v %v", res.Cleaned, err)
	}
	rsCheckFiles(t, staging, want) // the new tree is complete
	if got := snaptest.Dump(t, old, true); got != oldDump {
		t.Errorf("the old tree changed:\n%s", got)
	}
	// The user puts the old tree back: the new one is then removed.
	if err := os.Rename(old, target); err != nil {
		t.Fatal(err)
	}
	rsCleanRemoves(t, parent, staging, "after the user's rename")
	if got := snaptest.Dump(t, target, true); got != oldDump {
		t.Errorf("the target changed:\n%s", got)
	}
}

// TestCleanStagingLeavesOthers: a clean-up removes only directories named
// like a restore's; a file or a symlink of that name (pointing outside),
// a name with other digits, and a kept tree stay as they are.
func TestCleanStagingLeavesOthers(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	outsideBefore := snaptest.Dump(t, outside, true)
	const hex = "0123456789abcdef"
	stay := []string{stagePrefix + "0123456789ABCDEF", stagePrefix + "short", stageKept + hex, stagePrefix + "1111111111111111", stageOldPre + "2222222222222222"}
	for _, d := range []string{stay[0], stay[1], stay[2], stagePrefix + hex} {
		if err := os.MkdirAll(filepath.Join(parent, d, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(parent, stay[3]), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(parent, stay[4])); err != nil {
		t.Fatal(err)
	}
	found, err := CleanStaging(parent)
	if err != nil || len(found) != 3 {
		t.Fatalf("found %+v %v", found, err)
	}
	for _, f := range found {
		removed := f.Path == filepath.Join(parent, stagePrefix+hex)
		if f.Removed != removed {
			t.Errorf("%+v", f)
		}
	}
	got := snaptest.Leftovers(t, parent)
	slices.Sort(got)
	slices.Sort(stay)
	if !slices.Equal(got, stay) {
		t.Errorf("left %q, want %q", got, stay)
	}
	if after := snaptest.Dump(t, outside, true); after != outsideBefore {
		t.Errorf("outside changed:\n%s", after)
	}
}

// TestStageKeptAsideWhenUndoFails: the exchange held, the parent's fsync
// failed, and undoing the exchange failed too: the restore fails, the new
// tree is the target, and the replaced tree is renamed to
// .lifeboat-kept-<hex>, named in the error, which no clean-up removes.
func TestStageKeptAsideWhenUndoFails(t *testing.T) {
	t.Parallel()
	r, m, want := rsMixedRepo(t, 3, 1000)
	parent := t.TempDir()
	target, _ := rsOldTarget(t, parent)
	oldDump := snaptest.Dump(t, target, true)
	n := 0
	hooks := &stageHooks{
		renameat2: func(ofd int, op string, nfd int, np string, flags uint) error {
			if n++; n == 2 {
				return unix.EIO // the undo
			}
			return unix.Renameat2(ofd, op, nfd, np, flags)
		},
		renameat: unix.Renameat,
		fsync:    func(int) error { return unix.EIO },
	}
	res, err := Run(t.Context(), r.Repository, m, Options{Target: target, Replace: true, hooks: hooks})
	kept := filepath.Join(parent, stageKept+strings.TrimPrefix(filepath.Base(res.Staging), stagePrefix))
	if err == nil || !strings.Contains(err.Error(), "the old one at "+kept) {
		t.Fatalf("restore: %v; want the old tree named at %s", err, kept)
	}
	rsCheckFiles(t, target, want)
	if got := snaptest.Dump(t, kept, true); got != oldDump {
		t.Errorf("the kept tree differs from the old target:\n%s\nwant\n%s", got, oldDump)
	}
	if found, err := CleanStaging(parent); err != nil || len(found) != 0 {
		t.Errorf("clean-up found %+v %v", found, err)
	}
	if l := snaptest.Leftovers(t, parent); !slices.Equal(l, []string{filepath.Base(kept)}) {
		t.Errorf("left beside the target: %v", l)
	}
}

// TestStageLockLosesToCleanUp: between a restore's mkdir of its staging
// directory and its lock, a clean-up in another process may find the
// directory unlocked. If the clean-up holds the lock, or has already
// removed the directory, the restore's lock fails (it then tries another
// name) instead of writing into a directory being removed.
func TestStageLockLosesToCleanUp(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	s, err := newStage(filepath.Join(parent, "t"), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.abort()
	if s.lockFD < 0 {
		t.Fatal("the staging directory is not locked")
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, name string) (undo func())
	}{
		{"locked by a clean-up", func(t *testing.T, name string) func() {
			fd, err := unix.Open(filepath.Join(parent, name), unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			return func() { _ = unix.Close(fd); _ = os.Remove(filepath.Join(parent, name)) }
		}},
		{"removed by a clean-up", func(t *testing.T, name string) func() {
			if err := os.Remove(filepath.Join(parent, name)); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}},
		{"replaced under its name", func(t *testing.T, name string) func() {
			p := filepath.Join(parent, name)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			return func() { _ = os.Remove(p) }
		}},
	} {
		name := stagePrefix + stageRandom()
		if err := os.Mkdir(filepath.Join(parent, name), 0o700); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(filepath.Join(parent, name), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		undo := tc.setup(t, name)
		other := &stage{parentFD: s.parentFD, name: name, fd: fd, lockFD: -1}
		if other.lock() {
			t.Errorf("%s: the restore locked it", tc.name)
		}
		_ = unix.Close(fd)
		undo()
	}
	// And the lock held is seen by a clean-up.
	found, err := CleanStaging(parent)
	if err != nil || len(found) != 1 || found[0].Path != s.path() || found[0].Why != stagingInUse {
		t.Errorf("clean-up beside a live stage: %+v %v", found, err)
	}
}
