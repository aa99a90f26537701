package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lifeboat/backend/location"
	"lifeboat/bench"
	"lifeboat/blob"
	"lifeboat/internal/seedtest"
	"lifeboat/repo"
	"lifeboat/server"
	"lifeboat/snapshot"
	"lifeboat/snapshot/restore"
)

// fleetWorkspaces is how many workspaces a fleet test makes: def, or
// LIFEBOAT_FLEET_WORKSPACES.
func fleetWorkspaces(t testing.TB, def int) int {
	if v := os.Getenv("LIFEBOAT_FLEET_WORKSPACES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("LIFEBOAT_FLEET_WORKSPACES=%q: want a number of at least 10", v)
		}
		return n
	}
	return def
}

// fleetConfig is the [lifecycle] and [retention] of every fleet server.
const fleetConfig = `
[lifecycle]
periodic_interval = "15s"
check_interval = "2s"
max_parallel = 4

[retention]
keep_last = 1
`

// TestFleet runs the deployment of docs/deploy.md under chaos: one S3
// repository (versitygw), one PostgreSQL state store and three `lifeboat
// serve` processes with periodic captures of 1,000 small workspaces
// (LIFEBOAT_FLEET_WORKSPACES) and a prune schedule, while
//   - server A kills itself with SIGKILL right after a save to the
//     repository, mid-capture (the crash hook), and is started again;
//   - server B is killed with SIGKILL mid-recovery (after it created the
//     replacement), and another server finishes the recovery;
//   - server C is stopped with SIGSTOP mid-recovery (after the restore)
//     past its lease; another server finishes the recovery, and C, let go
//     on, finds it was taken over and stops driving it.
//
// At the end every approved recovery ended recovered with one replacement
// holding the captured files; every workspace has exactly one instance;
// a two-phase prune deletes what the schedule condemned; `check
// --read-data` is clean; and every workspace's last good checkpoint
// restores to exactly the files it was taken of.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PostgreSQL, versitygw and three lifeboat servers")
	}
	rng := seedtest.Rand(t)
	n := fleetWorkspaces(t, 1000)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()

	begin := time.Now()
	f := newFleet(t, true)
	schedule := "\n[prune]\nevery = \"20s\"\n"
	lease := "LIFEBOAT_STATE_LEASE=3s"
	crashAfter := 20 + rng.IntN(200)
	t.Logf("server A kills itself after its save %d", crashAfter)
	a := f.addServer("a", fleetConfig, lease, crashEnv+"="+strconv.Itoa(crashAfter))
	b := f.addServer("b", fleetConfig+schedule, lease, recoveryStopEnv+"=after:creating")
	c := f.addServer("c", fleetConfig+schedule, lease, recoveryStopEnv+"=after:restoring")

	// Every workspace gets a checkpoint from the periodic captures, while
	// server A dies mid-capture.
	ids := f.addWorkspaces(ctx, n, b, c) // A's saves count from its captures on
	f.waitCaptured(ctx, ids, 0, time.Time{})
	t.Logf("%s: every workspace captured; S3 requests: %s", time.Since(begin).Round(time.Second), f.requestSummary())
	select {
	case <-a.exited:
	case <-ctx.Done():
		t.Fatalf("server A did not crash after %d saves", crashAfter)
	}
	if ws, ok := a.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("server A ended with %v, not SIGKILL\n%s", a.cmd.ProcessState, a.log)
	}
	a.start(lease)

	// Some workspaces change; each is captured again, and retention
	// (keep_last = 1) forgets the checkpoint before, so the prune
	// schedule finds packs to condemn.
	changed := map[string]bool{}
	from := f.events.len()
	for _, i := range rng.Perm(n)[:max(10, n/20)] {
		writeSmallWorkspace(t, filepath.Join(f.root, ids[i]), i, 1)
		changed[ids[i]] = true
	}
	f.waitCaptured(ctx, slices.Collect(maps.Keys(changed)), from, time.Now())
	t.Logf("%s: %d changed workspaces captured", time.Since(begin).Round(time.Second), len(changed))

	// Three workspaces are lost and recovered: through B (killed after
	// creating the replacement), C (stopped after restoring) and A.
	lost := map[string]*fleetServer{}
	for _, s := range []*fleetServer{b, c, a} {
		for {
			id := ids[rng.IntN(n)]
			if _, taken := lost[id]; !taken {
				lost[id] = s
				f.lose(ctx, id, s)
				break
			}
		}
	}
	ops := map[string]string{} // workspace -> operation
	for id, s := range lost {
		var at <-chan struct{}
		switch s {
		case b:
			at = b.log.wait("at after:creating")
		case c:
			at = c.log.wait("at after:restoring")
		}
		op := f.approve(ctx, s, id)
		ops[id] = op.ID
		if at == nil {
			continue
		}
		select {
		case <-at:
		case <-ctx.Done():
			t.Fatalf("server %s did not reach its stop point\n%s", s.name, s.log)
		}
		if s == b {
			b.signal(syscall.SIGKILL)
			<-b.exited
		} else {
			c.signal(syscall.SIGSTOP)
		}
	}
	// A finishes all three: its own, and B's and C's once their leases
	// lapsed.
	for id, op := range ops {
		got, err := a.client().WaitOperation(ctx, op, 200*time.Millisecond)
		if err != nil || got.Step != "recovered" {
			t.Fatalf("recovery of %s (%s): %+v %v\nA: %s", id, op, got, err, a.log)
		}
	}
	recovered := time.Now()
	takenOver := c.log.wait("stops driving it")
	c.signal(syscall.SIGCONT)
	select {
	case <-takenOver:
	case <-ctx.Done():
		t.Fatalf("server C, let go on, did not see its operation taken over\n%s", c.log)
	}
	b.start(lease)
	t.Logf("%s: three recoveries done", time.Since(begin).Round(time.Second))
	// The first capture of a replacement may take a new checkpoint (its
	// files are new to the fingerprint) and retention then forgets the
	// one it was restored from: the last good checkpoints the end checks
	// are read after it.
	f.waitCaptured(ctx, slices.Collect(maps.Keys(lost)), 0, recovered)

	// The schedule condemned what retention left unused.
	f.events.until(t, ctx, func() string { return "a prune that condemns packs" }, 0, func(ev fleetEvent) bool {
		var m struct {
			Report struct {
				Prune struct {
					Condemned int `json:"packs_condemned"`
				} `json:"prune"`
			} `json:"report"`
			Error string `json:"error"`
		}
		if ev.typ != "maintenance" {
			return false
		}
		if err := json.Unmarshal(ev.data, &m); err != nil || m.Error != "" {
			t.Fatalf("maintenance on %s: %s %v", ev.server, ev.data, err)
		}
		return m.Report.Prune.Condemned > 0
	})

	t.Logf("%s: a prune condemned packs", time.Since(begin).Round(time.Second))

	// Every server sees the same end state.
	wss, err := a.client().Workspaces(ctx)
	f.check(err)
	if len(wss) != n {
		t.Fatalf("%d workspaces, want %d", len(wss), n)
	}
	for id, op := range ops {
		for _, s := range []*fleetServer{a, b, c} {
			got, err := s.client().Operations(ctx, id)
			if err != nil || len(got) != 1 || got[0].ID != op || got[0].Step != "recovered" {
				t.Fatalf("operations of %s on server %s: %+v %v", id, s.name, got, err)
			}
		}
	}
	for _, s := range []*fleetServer{a, b, c} {
		s.stop()
	}

	// No workspace has two instances, and no instance is left over.
	instances := f.instances()
	var want []string
	for _, w := range wss {
		want = append(want, string(w.Instance))
		if w.LastGood == nil {
			t.Fatalf("workspace %s has no last good checkpoint", w.ID)
		}
		if _, ok := lost[w.ID]; ok {
			if d, err := bench.Compare(filepath.Join(f.dir, "lost", w.ID), filepath.Join(f.root, string(w.Instance))); err != nil || len(d) > 0 {
				t.Fatalf("the replacement of %s differs from what was captured: %v %v", w.ID, d, err)
			}
		}
	}
	slices.Sort(want)
	if !slices.Equal(instances, want) {
		t.Fatalf("instances in the provider's root: %d, the workspaces': %d", len(instances), len(want))
	}

	// A two-phase prune whose clock is past the margin deletes what the
	// schedule condemned; then the repository checks clean.
	var pruned struct {
		Deleted int `json:"packs_deleted"`
	}
	out := f.lifeboatEnv([]string{pruneClockEnv + "=25h"}, "--json", "prune")
	f.check(json.Unmarshal([]byte(lastLine(out)), &pruned))
	if pruned.Deleted == 0 {
		t.Fatalf("the prune past the margin deleted nothing: %s", out)
	}
	f.lifeboat("check", "--read-data")
	t.Logf("%s: pruned and checked", time.Since(begin).Round(time.Second))

	// Every last good checkpoint restores to the files it was taken of:
	// the instance's files now, for nothing changed them since. The
	// recovered workspaces and a sample of the others go through `lifeboat
	// restore`; every workspace goes through the same restore code in this
	// process, on one open repository (a process per workspace, opening
	// the repository each time, took most of the test's time at 1,000).
	f.check(os.Mkdir(filepath.Join(f.dir, "restored"), 0o755))
	verify := func(w server.WorkspaceView, restoreTo func(target string) error) {
		target := filepath.Join(f.dir, "restored", w.ID)
		if err := restoreTo(target); err != nil {
			t.Errorf("restoring %s of %s: %v\nits receipts:\n%s%s", w.LastGood.Snapshot, w.ID, err, f.events.history(w.ID), f.serverLines(w.ID)+f.requestsFor(w.LastGood.Snapshot))
			return
		}
		if d, err := bench.Compare(filepath.Join(f.root, string(w.Instance)), target); err != nil || len(d) > 0 {
			t.Errorf("last good checkpoint %s of %s differs from its files: %v %v\nits receipts:\n%s%s", w.LastGood.Snapshot, w.ID, d, err, f.events.history(w.ID), f.serverLines(w.ID))
		}
		if err := os.RemoveAll(target); err != nil {
			t.Error(err)
		}
	}
	sample := 0
	for _, w := range wss {
		if _, ok := lost[w.ID]; ok || (sample < 30 && rng.IntN(len(wss)) < 30) {
			sample++
			verify(w, func(target string) error {
				_, err := f.run(nil, "restore", "--target", target, w.LastGood.Snapshot)
				return err
			})
		}
	}
	f.restoreEach(ctx, wss, verify)
	t.Logf("%s: %d last good checkpoints restored, %d of them by `lifeboat restore`", time.Since(begin).Round(time.Second), len(wss), sample)
}

// restoreEach has verify restore the last good checkpoint of every
// workspace of wss, four at a time, with restore.Run on one repository
// this process opens.
func (f *fleet) restoreEach(ctx context.Context, wss []server.WorkspaceView, verify func(server.WorkspaceView, func(string) error)) {
	f.t.Helper()
	be, err := location.Open(ctx, f.loc, location.S3{AccessKeyID: f.s3.AccessKey, SecretAccessKey: f.s3.SecretKey})
	f.check(err)
	defer be.Close()
	r, err := repo.Open(ctx, be, []byte(testPW), repo.Options{CacheDir: filepath.Join(f.dir, "test-cache")})
	f.check(err)
	defer func() { f.check(r.Close(ctx)) }()
	work := make(chan server.WorkspaceView)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for w := range work {
				verify(w, func(target string) error {
					id, err := blob.ParseID(w.LastGood.Snapshot)
					if err != nil {
						return err
					}
					m, err := snapshot.LoadManifest(ctx, r, id)
					if err != nil {
						return err
					}
					_, err = restore.Run(ctx, r, m, restore.Options{Target: target, Workers: 2})
					return err
				})
			}
		})
	}
	for _, w := range wss {
		work <- w
	}
	close(work)
	wg.Wait()
}

// waitCaptured waits for a captured or unchanged receipt of every
// workspace of ids among the events from the from'th on, of a capture
// that started at or after since: a capture that started before the files
// were written may hold the old ones, or a prefix of a file being
// rewritten. Unchanged counts: it says the last good checkpoint holds the
// files (a server killed right after a promotion sends no receipt for it,
// and the others then find the workspace unchanged).
func (f *fleet) waitCaptured(ctx context.Context, ids []string, from int, since time.Time) {
	f.t.Helper()
	left := map[string]bool{}
	for _, id := range ids {
		left[id] = true
	}
	what := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "captures of %d workspaces; %d not captured", len(ids), len(left))
		n := 0
		for id := range left {
			if n++; n > 3 {
				break
			}
			fmt.Fprintf(&b, "\n%s, its receipts:\n%s%s  its record: %s", id, f.events.history(id), f.serverLines(id), f.record(id))
		}
		return b.String()
	}
	f.events.until(f.t, ctx, what, from, func(ev fleetEvent) bool {
		if ev.typ == "receipt" && (ev.Outcome == "captured" || ev.Outcome == "unchanged") && !ev.Started.Before(since) {
			delete(left, ev.Workspace)
		}
		return len(left) == 0
	})
}

// lose takes workspace id's instance away (kept aside under lost/) and
// has server s see it lost.
func (f *fleet) lose(ctx context.Context, id string, s *fleetServer) {
	f.t.Helper()
	f.check(os.MkdirAll(filepath.Join(f.dir, "lost"), 0o755))
	f.check(os.Rename(filepath.Join(f.root, id), filepath.Join(f.dir, "lost", id)))
	st, err := s.client().Check(ctx, id)
	if err != nil || st.State != "lost" {
		f.t.Fatalf("check of %s on server %s: %+v %v", id, s.name, st, err)
	}
}

// approve approves the recovery of id from its last good checkpoint
// through server s.
func (f *fleet) approve(ctx context.Context, s *fleetServer, id string) server.Operation {
	f.t.Helper()
	offer, err := s.client().Offer(ctx, id)
	f.check(err)
	op, err := s.client().Approve(ctx, id, offer.Checkpoint, "fleet-"+id)
	if err != nil {
		f.t.Fatalf("approving the recovery of %s on server %s: %v", id, s.name, err)
	}
	return op
}

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
