package recovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/crypt"
	"lifeboat/providers"
	"lifeboat/prune"
)

// When the last good checkpoint cannot be read, the offer names the
// newest earlier one that can, lists every candidate with its time, and
// an approval of the earlier one recovers it; while the workspace is lost
// every checkpoint it may be recovered from is held in the repository.
func TestApproveEarlierCheckpoint(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, map[string]string{"a.txt": "first"})
		first := e.capture()
		e.clock.Advance(time.Minute)
		writeFiles(t, e.dir("bot1"), map[string]string{"a.txt": "second"})
		second := e.capture()
		e.lose()

		pins, err := prune.LoadPins(e.ctx, e.r)
		if err != nil {
			t.Fatal(err)
		}
		if all := pins.HoldsAll(); len(all) != 1 || all[0] != "bot1" {
			t.Fatalf("a lost workspace holds every checkpoint: %+v", all)
		}
		o, err := e.svc.Offer(e.ctx, "bot1")
		if err != nil || o.Checkpoint != second.Snapshot || o.Warning != "" || len(o.Candidates) != 2 {
			t.Fatalf("offer: %+v %v", o, err)
		}
		if c := o.Candidates; !c[0].LastGood || !c[0].Readable || c[1].Checkpoint != first.Snapshot || !c[1].Readable || !c[1].Time.Before(c[0].Time) {
			t.Fatalf("candidates: %+v", c)
		}

		// The last good checkpoint's manifest is gone (damage, a stray delete).
		if err := e.r.RemoveObject(e.ctx, crypt.KindSnapshot, mustID(t, second.Snapshot)); err != nil {
			t.Fatal(err)
		}
		o, err = e.svc.Offer(e.ctx, "bot1")
		if err != nil || o.Checkpoint != first.Snapshot || !strings.Contains(o.Warning, "cannot be read") || o.Candidates[0].Readable {
			t.Fatalf("offer without the last good checkpoint: %+v %v", o, err)
		}
		if _, err := e.svc.Approve(e.ctx, "bot1", strings.Repeat("ab", 32), "k0"); !errors.Is(err, ErrStaleOffer) {
			t.Fatalf("approval of a checkpoint the offer does not list: %v", err)
		}
		op, err := e.svc.Approve(e.ctx, "bot1", first.Snapshot, "k1")
		if err != nil || op.Checkpoint != first.Snapshot || !op.CheckpointTime.Equal(first.Started) {
			t.Fatalf("approve the earlier checkpoint: %+v %v", op, err)
		}
		if op = e.wait(op.ID); op.State != OpRecovered {
			t.Fatalf("operation: %+v", op)
		}
		w, _ := e.store.Workspace("bot1")
		if got := readFile(t, filepath.Join(e.dir(w.Instance), "a.txt")); got != "first" {
			t.Fatalf("recovered a.txt = %q", got)
		}
		if w.LastGood.Snapshot != first.Snapshot {
			t.Fatalf("last good after recovering the earlier checkpoint: %+v", w.LastGood)
		}
		pins, _ = prune.LoadPins(e.ctx, e.r)
		if len(pins.HoldsAll()) != 0 {
			t.Fatalf("still holding everything after the recovery: %+v", pins.Objects)
		}
		if _, held := pins.Held("bot1", mustID(t, first.Snapshot)); !held {
			t.Fatal("the new last good checkpoint is not held")
		}
	})
}

// A copy-back failure that trying again cannot mend (a file type the
// provider refuses, before anything is written) is not retried: the
// replacement is destroyed, no repair hold is kept, and the operation says
// what to do.
func TestPermanentCopyBackFailure(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e, cp := newLostREnv(t)
		calls := e.refuseCopyBack(providers.KindUnsupported, errors.New("socket run/agent.sock: provider local cannot create sockets"))
		op := e.approve(cp.Snapshot, "perm")
		op = e.wait(op.ID)
		if op.State != OpFailed || op.Hold != "" || *calls != 1 {
			t.Fatalf("operation: %+v after %d calls", op, *calls)
		}
		if !strings.Contains(op.Error, "run/agent.sock") || !strings.Contains(strings.ToLower(op.Action), "approve") {
			t.Fatalf("error %q, action %q", op.Error, op.Action)
		}
		if holds, _ := e.svc.RepairHolds(); len(holds) != 0 {
			t.Fatalf("holds: %+v", holds)
		}
		if got := e.instances(); len(got) != 0 {
			t.Fatalf("replacement kept: %v", got)
		}
	})
}

// The offer says, before approval, what of this checkpoint the provider
// cannot hold in a replacement, naming the paths.
func TestOfferSaysWhatWillNotComeBack(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, map[string]string{"a.txt": "alpha"})
		dir := e.dir("bot1")
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")))
		must(unix.Mkfifo(filepath.Join(dir, "pipe"), 0o600))
		if err := unix.Setxattr(filepath.Join(dir, "a.txt"), "user.note", []byte("kept"), 0); err != nil {
			t.Skipf("the filesystem under the test's temp dir refuses user xattrs: %v", err)
		}
		ln, err := net.Listen("unix", filepath.Join(dir, "agent.sock"))
		must(err)
		defer ln.Close()
		cp := e.capture()
		_ = cp
		e.lose()

		o, err := e.svc.Offer(e.ctx, "bot1")
		must(err)
		all := strings.Join(o.NotRecoverable, "\n")
		if !strings.Contains(all, "agent.sock") || strings.Contains(all, "hard links") || strings.Contains(all, "named pipes") {
			t.Fatalf("the local provider holds everything but the socket:\n%s", all)
		}
		e.p.support = &providers.FileSupport{}
		o, err = e.svc.Offer(e.ctx, "bot1")
		must(err)
		all = strings.Join(o.NotRecoverable, "\n")
		for _, want := range []string{"hard links 1 (b.txt)", "extended attributes of 1 (a.txt)", "named pipes 1 (pipe)", "holes of sparse files", "file owners"} {
			if !strings.Contains(all, want) {
				t.Fatalf("offer does not say %q:\n%s", want, all)
			}
		}
	})
}

// A refusal after writing into the replacement started (here a
// permission refusal half-way) keeps the replacement under a repair hold,
// whatever its class: it is half-written.
func TestRefusalAfterWritingKeepsHold(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e, cp := newLostREnv(t)
		e.p.writeCtx = func(ctx context.Context, id providers.InstanceID) (string, error, bool) {
			providers.WriteStarted(ctx)
			return "", &providers.Error{Provider: "local", Op: "write files", Instance: id, Kind: providers.KindPermission,
				Err: errors.New("sub/b.txt: permission denied")}, true
		}
		op := e.approve(cp.Snapshot, "half")
		if op = e.wait(op.ID); op.State != OpFailed || op.Hold == "" {
			t.Fatalf("operation: %+v", op)
		}
		if got := e.instances(); len(got) != 1 || got[0] != string(op.Replacement) {
			t.Fatalf("the half-written replacement was not kept: %v", got)
		}
	})
}

// A promotion whose snapshot was removed (by a forget elsewhere) before
// its hold was written fails, and the last good checkpoint stays.
func TestPromotionOfRemovedSnapshotFails(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		good := e.capture()
		e.capturer = &scripted{fail: map[int]error{}} // invents a snapshot the repository does not have
		e.reopen()
		r := e.lc.Capture(e.ctx, "bot1", ReasonManual)
		if r.Outcome != Failed || !strings.Contains(r.Error, "removed before its hold was recorded") {
			t.Fatalf("capture: %+v", r)
		}
		if w, _ := e.store.Workspace("bot1"); w.LastGood.Snapshot != good.Snapshot {
			t.Fatalf("last good moved to a removed snapshot: %+v", w.LastGood)
		}
	})
}

// A copy-back that ran out of a deadline of the provider's own (a dial
// timeout), not the operation's, waits like an outage: the step is parked
// until the next check, not run again at once.
func TestCopyBackProviderTimeoutWaits(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e, cp := newLostREnv(t)
		calls := e.refuseCopyBack(providers.KindUnavailable, fmt.Errorf("dial: %w", context.DeadlineExceeded))
		op := e.approve(cp.Snapshot, "timeout")
		if op = e.wait(op.ID); op.State != OpRestoring || op.LastError == "" || op.RetryAt.IsZero() || *calls != 1 {
			t.Fatalf("after a provider timeout: %+v (%d calls)", op, *calls)
		}
	})
}

// A lost process recorded with a redacted command is not run as
// recorded: the restart is refused and says why.
func TestRedactedProcessNotRestarted(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		e.lc.cfg.Redact = RedactPatterns(regexp.MustCompile(`--token=\S+`))
		if _, err := e.lc.StartProcess("bot1", []string{"agent", "--token=s3cr3t"}, "."); err != nil {
			t.Fatal(err)
		}
		cp := e.capture()
		e.lose()
		op := e.approve(cp.Snapshot, "k")
		if op = e.wait(op.ID); op.State != OpRecovered {
			t.Fatalf("operation: %+v", op)
		}
		if _, err := e.svc.RestartProcess(e.ctx, "bot1", 0, "r1"); !errors.Is(err, ErrNotRestartable) || strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("restart of a redacted command: %v", err)
		}
	})
}

// An earlier checkpoint whose snapshot was removed (retention, forget) is
// no candidate of the offer; an approval names a checkpoint by its id or
// a unique prefix of 8 or more hex digits, and one that is not a
// checkpoint of the workspace is refused as such, not as unreadable.
func TestOfferLeavesOutRemovedCheckpoints(t *testing.T) {
	e := newREnv(t, map[string]string{"a.txt": "first"})
	first := e.capture()
	for _, v := range []string{"second", "third"} {
		e.clock.Advance(time.Minute)
		writeFiles(t, e.dir("bot1"), map[string]string{"a.txt": v})
		e.capture()
	}
	hist, err := e.store.Checkpoints("bot1")
	if err != nil || len(hist) != 3 {
		t.Fatalf("history: %+v %v", hist, err)
	}
	second, third := hist[1], hist[2]
	e.lose()
	if err := e.r.RemoveObject(e.ctx, crypt.KindSnapshot, mustID(t, second.Snapshot)); err != nil {
		t.Fatal(err)
	}
	o, err := e.svc.Offer(e.ctx, "bot1")
	if err != nil || o.Checkpoint != third.Snapshot || len(o.Candidates) != 2 || o.Candidates[1].Checkpoint != first.Snapshot || !o.Candidates[1].Readable {
		t.Fatalf("offer after the middle checkpoint was removed: %+v %v", o.Candidates, err)
	}
	for _, ref := range []string{strings.Repeat("0", 64), "0123abcd", first.Snapshot[:7], second.Snapshot} {
		if _, err := e.svc.Approve(e.ctx, "bot1", ref, "k-"+ref); !errors.Is(err, ErrStaleOffer) || (ref != second.Snapshot && !strings.Contains(err.Error(), "is not one of the checkpoints of bot1")) {
			t.Fatalf("approval of %s: %v", ref, err)
		}
	}
	op, err := e.svc.Approve(e.ctx, "bot1", strings.ToUpper(first.Snapshot[:16]), "k1")
	if err != nil || op.Checkpoint != first.Snapshot {
		t.Fatalf("approval by a 16-digit prefix in upper case: %+v %v", op, err)
	}
	if again, err := e.svc.Approve(e.ctx, "bot1", first.Snapshot, "k1"); err != nil || again.ID != op.ID {
		t.Fatalf("the same approval by the whole id: %+v %v", again, err)
	}
	if op = e.wait(op.ID); op.State != OpRecovered {
		t.Fatalf("operation: %+v", op)
	}
}
