package repo

import (
	"bytes"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"lifeboat/blob"
	"lifeboat/internal/proctest"
)

// A locker removes the lock objects of dead processes of this host that it
// sees, whatever their mode, age or waiting state, also when it is refused
// itself; it never removes a lock of another host (even one whose PID is
// not running here, or one stale by time) nor a live lock of this host.
// Listing alone removes nothing.
func TestLockRemovesDeadHere(t *testing.T) {
	pid := proctest.DeadPID(t)
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		r := tr.openLocker(t)
		host, _ := os.Hostname()
		old := time.Now().Add(-DefaultLockStale - time.Minute)
		saveDead := func() []blob.ID {
			return []blob.ID{
				saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockShared, Owner: "dead-shared", Host: host, PID: pid, Time: time.Now(), Refreshed: time.Now()}),
				saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockExclusive, Owner: "dead-exclusive", Host: host, PID: pid, Time: time.Now(), Refreshed: time.Now()}),
				saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockExclusive, Waiting: true, Owner: "dead-waiter", Host: host, PID: pid, Time: time.Now(), Refreshed: time.Now()}),
				saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockPrune, Owner: "dead-old", Host: host, PID: pid, Time: old, Refreshed: old}),
			}
		}
		kept := []blob.ID{
			saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockShared, Owner: "elsewhere", Host: "elsewhere", PID: pid, Time: time.Now(), Refreshed: time.Now()}),
			saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockShared, Owner: "elsewhere-stale", Host: "elsewhere", PID: pid, Time: old, Refreshed: old}),
			saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockShared, Owner: "live-here", Host: host, PID: os.Getpid(), Time: time.Now(), Refreshed: time.Now()}),
		}
		ids := func() []blob.ID {
			t.Helper()
			locks, err := r.ListLocks(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var out []blob.ID
			for _, l := range locks {
				out = append(out, l.ID)
			}
			return out
		}
		same := func(what string, got, want []blob.ID) {
			t.Helper()
			cmpID := func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) }
			slices.SortFunc(got, cmpID)
			slices.SortFunc(want, cmpID)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: lock objects %v, want %v", what, got, want)
			}
		}

		deadIDs := saveDead()
		same("listed", ids(), append(slices.Clone(kept), deadIDs...))
		// An exclusive locker is refused by the live locks, and still removes
		// the dead ones it saw.
		if h := lockedBy(t, lockErr(r.Lock(t.Context(), LockExclusive, noWait()))); !slices.Contains(kept, h.ID) {
			t.Fatalf("refused by %v, want a live lock", h)
		}
		same("after a refused exclusive locker", ids(), slices.Clone(kept))

		for _, m := range []LockMode{LockShared, LockPrune} {
			saveDead()
			l := mustLock(t, r, m, noWait())
			same("while a "+string(m)+" lock is held", ids(), append(slices.Clone(kept), l.Info().ID))
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		same("at the end", ids(), slices.Clone(kept))
	})
}
