package repo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/proctest"
)

// openLocker opens a second handle on tr's repository (as another process
// would). Its clock is time.Now: the tests that move time run in a
// testing/synctest bubble, where time.Sleep advances the fake clock at
// once.
func (tr *testRepo) openLocker(t *testing.T) *Repository {
	t.Helper()
	r, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: t.TempDir(), NoIndexDB: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func noWait() LockOptions { return LockOptions{Wait: -1, Refresh: -1} }

func mustLock(t *testing.T, r *Repository, m LockMode, o LockOptions) *Lock {
	t.Helper()
	l, err := r.Lock(t.Context(), m, o)
	if err != nil {
		t.Fatalf("lock %s: %v", m, err)
	}
	return l
}

func TestLockModes(t *testing.T) {
	tr := newTestRepo(t)
	a, b := tr.openLocker(t), tr.openLocker(t)
	cases := []struct {
		held, want LockMode
		ok         bool
	}{
		{LockShared, LockShared, true},
		{LockShared, LockPrune, true},
		{LockPrune, LockShared, true},
		{LockShared, LockExclusive, false},
		{LockExclusive, LockShared, false},
		{LockPrune, LockPrune, false},
		{LockPrune, LockExclusive, false},
		{LockExclusive, LockExclusive, false},
	}
	for _, tc := range cases {
		h := mustLock(t, a, tc.held, noWait())
		l, err := b.Lock(t.Context(), tc.want, noWait())
		if tc.ok != (err == nil) {
			t.Errorf("%s held, %s wanted: err %v", tc.held, tc.want, err)
		}
		if err == nil {
			_ = l.Unlock(t.Context())
		} else {
			var le *LockedError
			if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || le.Holder.ID != h.Info().ID {
				t.Errorf("%s held, %s wanted: error %v does not name the holder", tc.held, tc.want, err)
			}
			if !strings.Contains(err.Error(), "PID") || !strings.Contains(err.Error(), "host") {
				t.Errorf("message lacks PID and host: %v", err)
			}
		}
		// The refused attempt left no lock object behind.
		if err := h.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if locks, _ := a.ListLocks(t.Context()); len(locks) != 0 {
			t.Fatalf("%s/%s: %d locks left", tc.held, tc.want, len(locks))
		}
	}
}

func TestLockSameOwnerDoesNotConflict(t *testing.T) {
	tr := newTestRepo(t)
	r := tr.openLocker(t)
	p := mustLock(t, r, LockPrune, noWait())
	o := noWait()
	o.Owner = p.Owner()
	x := mustLock(t, r, LockExclusive, o)
	// Another owner is kept out by both.
	if _, err := r.Lock(t.Context(), LockShared, noWait()); !errors.Is(err, ErrLocked) {
		t.Fatalf("shared lock next to an exclusive one: %v", err)
	}
	_ = x.Unlock(t.Context())
	_ = p.Unlock(t.Context())
}

func TestLockWaitsThenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		a, b := tr.openLocker(t), tr.openLocker(t)
		h := mustLock(t, a, LockExclusive, LockOptions{Refresh: -1, Command: "prune"})
		defer h.Unlock(t.Context())
		sleeps := 0
		var waitedOn LockInfo
		o := LockOptions{Wait: 10 * time.Second, Refresh: -1,
			Sleep:  func(_ context.Context, d time.Duration) error { sleeps++; time.Sleep(d); return nil },
			OnWait: func(h LockInfo) { waitedOn = h }}
		_, err := b.Lock(t.Context(), LockShared, o)
		var le *LockedError
		if !errors.As(err, &le) || le.Waited < 10*time.Second || sleeps < 2 {
			t.Fatalf("want a LockedError after waiting 10s with several tries, got %v after %d sleeps", err, sleeps)
		}
		if waitedOn.ID != h.Info().ID || !strings.Contains(err.Error(), "(prune)") {
			t.Fatalf("wait callback got %v; error %v", waitedOn, err)
		}
	})
}

func TestLockWaitSucceedsWhenReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		a, b := tr.openLocker(t), tr.openLocker(t)
		h := mustLock(t, a, LockShared, noWait())
		o := LockOptions{Wait: time.Minute, Refresh: -1, Sleep: func(ctx context.Context, d time.Duration) error {
			time.Sleep(d)
			return h.Unlock(ctx) // the holder finishes while we wait
		}}
		l, err := b.Lock(t.Context(), LockExclusive, o)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(t.Context())
	})
}

func TestLockStaleByTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		a, b := tr.openLocker(t), tr.openLocker(t)
		old := mustLock(t, a, LockExclusive, noWait()) // never refreshed: its holder "hangs"
		time.Sleep(DefaultLockStale + time.Second)
		live := mustLock(t, b, LockShared, noWait()) // the stale lock keeps no one out
		if old.Err() == nil || !errors.Is(old.Err(), ErrLockLost) {
			t.Fatalf("holder of a stale lock is not told: %v", old.Err())
		}
		locks, err := b.ListLocks(t.Context())
		if err != nil || len(locks) != 2 {
			t.Fatalf("%d locks, %v", len(locks), err)
		}
		removed, err := b.RemoveLocks(t.Context(), false)
		if err != nil || len(removed) != 1 || removed[0].ID != old.Info().ID || !strings.Contains(removed[0].StaleReason, "not refreshed") {
			t.Fatalf("unlock removed %v, %v; want only the stale lock", removed, err)
		}
		if removed, _ := b.RemoveLocks(t.Context(), true); len(removed) != 1 || removed[0].ID != live.Info().ID {
			t.Fatalf("forced unlock removed %v", removed)
		}
		// The forced-out holder learns it at its next refresh.
		if err := live.Refresh(t.Context()); !errors.Is(err, ErrLockLost) || !errors.Is(live.Err(), ErrLockLost) {
			t.Fatalf("refresh after forced unlock: %v", err)
		}
	})
}

func TestLockStaleDeadPID(t *testing.T) {
	pid := proctest.DeadPID(t)
	tr := newTestRepo(t)
	r := tr.openLocker(t)
	host, _ := os.Hostname()
	dead := LockInfo{Version: 1, Mode: LockExclusive, Owner: "dead", Host: host, PID: pid, Time: r.now(), Refreshed: r.now()}
	b, _ := json.Marshal(dead)
	id, err := r.SaveObject(t.Context(), crypt.KindLock, blob.Workspace, b)
	if err != nil {
		t.Fatal(err)
	}
	locks, err := r.ListLocks(t.Context())
	if err != nil || len(locks) != 1 || locks[0].ID != id || !strings.Contains(locks[0].StaleReason, "not running") {
		t.Fatalf("listed %v, %v", locks, err)
	}
	// The next locker removes it (TestLockRemovesDeadHere).
	l := mustLock(t, r, LockShared, noWait())
	_ = l.Unlock(t.Context())
	removed, err := r.RemoveLocks(t.Context(), false)
	if err != nil || len(removed) != 0 {
		t.Fatalf("left for unlock: %v, %v", removed, err)
	}
}

func TestLockRefreshAndDamaged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		r := tr.openLocker(t)
		l := mustLock(t, r, LockShared, noWait())
		first := l.Info().ID
		time.Sleep(time.Minute)
		if err := l.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		locks, _ := r.ListLocks(t.Context())
		if len(locks) != 1 || locks[0].ID == first || !locks[0].Refreshed.Equal(time.Now()) {
			t.Fatalf("after refresh: %+v", locks)
		}
		// An object in locks/ that does not open is reported and keeps no one out.
		bad, err := r.SaveObject(t.Context(), crypt.KindLock, blob.Workspace, []byte("not json"))
		if err != nil {
			t.Fatal(err)
		}
		x := mustLock(t, tr.openLocker(t), LockShared, noWait())
		_ = x.Unlock(t.Context())
		removed, _ := r.RemoveLocks(t.Context(), false)
		if len(removed) != 1 || removed[0].ID != bad || removed[0].Damaged == "" {
			t.Fatalf("removed %+v", removed)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// fakeSleep sleeps each wait (in a synctest bubble: the fake clock moves
// by it at once) and then runs each of then in turn (the last one again
// for later waits, if any).
func fakeSleep(then ...func(ctx context.Context) error) func(ctx context.Context, d time.Duration) error {
	n := 0
	return func(ctx context.Context, d time.Duration) error {
		time.Sleep(d)
		if len(then) == 0 {
			return nil
		}
		f := then[min(n, len(then)-1)]
		n++
		return f(ctx)
	}
}

// saveLockInfo stores a lock object as another process would.
func saveLockInfo(t *testing.T, r *Repository, info LockInfo) blob.ID {
	t.Helper()
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.SaveObject(t.Context(), crypt.KindLock, blob.Workspace, b)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func lockedBy(t *testing.T, err error) LockInfo {
	t.Helper()
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("want a LockedError, got %v", err)
	}
	return le.Holder
}

// A stream of overlapping shared locks (each taken before the one before
// it goes) never leaves a moment without one. Without writer preference
// the exclusive locker waited for such a moment and starved; now the new
// shared lockers wait behind it, and it gets in once the ones held before
// it are gone.
func TestLockExclusiveNotStarvedBySharedStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		a, b, w := tr.openLocker(t), tr.openLocker(t), tr.openLocker(t)
		held := []*Lock{mustLock(t, a, LockShared, noWait())}
		refused := 0
		stream := func(ctx context.Context) error {
			// The next capture starts before the oldest one ends.
			l, err := b.Lock(ctx, LockShared, noWait())
			switch {
			case err == nil:
				held = append(held, l)
			case errors.Is(err, ErrLocked):
				if h := lockedBy(t, err); !h.Waiting || h.Mode != LockExclusive || h.Owner != "waiter" {
					t.Errorf("shared lock refused by %v, want the waiting exclusive lock", h)
				}
				refused++
			default:
				return err
			}
			if len(held) > 0 {
				if err := held[0].Unlock(ctx); err != nil {
					return err
				}
				held = held[1:]
			}
			return nil
		}
		x, err := w.Lock(t.Context(), LockExclusive, LockOptions{Wait: 10 * time.Minute, Refresh: -1, Owner: "waiter", Sleep: fakeSleep(stream)})
		if err != nil {
			t.Fatalf("the exclusive locker starved: %v (%d shared locks held)", err, len(held))
		}
		if refused == 0 || len(held) != 0 || x.Info().Waiting {
			t.Fatalf("refused %d shared locks, %d held, granted %+v", refused, len(held), x.Info())
		}
		locks, _ := w.ListLocks(t.Context())
		if len(locks) != 1 || locks[0].ID != x.Info().ID || locks[0].Waiting {
			t.Fatalf("locks while the exclusive one is held: %+v", locks)
		}
		_ = x.Unlock(t.Context())
		mustLock(t, b, LockShared, noWait()).Unlock(t.Context())
	})
}

// While an exclusive locker waits, new shared and prune lockers of other
// owners wait behind it; the owner of a lock it waits for does not (that
// would deadlock); and it is granted once the locks held before it go.
func TestLockWaitingExclusiveBlocksNewLockers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		a, b, w := tr.openLocker(t), tr.openLocker(t), tr.openLocker(t)
		h := mustLock(t, a, LockShared, noWait())
		checked := false
		whileWaiting := func(ctx context.Context) error {
			if checked {
				return h.Unlock(ctx)
			}
			checked = true
			locks, err := b.ListLocks(ctx)
			if err != nil || len(locks) != 2 {
				t.Errorf("locks while waiting: %+v, %v", locks, err)
			}
			if _, err := b.Lock(ctx, LockExclusive, noWait()); !errors.Is(err, ErrLocked) {
				t.Errorf("a second exclusive lock: %v", err)
			}
			for _, m := range []LockMode{LockShared, LockPrune} {
				_, err := b.Lock(ctx, m, noWait())
				if hl := lockedBy(t, err); !hl.Waiting || hl.Owner != "waiter" {
					t.Errorf("%s lock refused by %v, want the waiting exclusive lock", m, hl)
				}
				if m == LockShared && !strings.Contains(err.Error(), "waited for by PID") {
					t.Errorf("message does not say the lock waits: %v", err)
				}
			}
			// A second shared lock of the holder's owner is not held up.
			o := noWait()
			o.Owner = h.Owner()
			l, err := b.Lock(ctx, LockShared, o)
			if err != nil {
				t.Errorf("a second lock of the holder's owner: %v", err)
				return nil
			}
			return l.Unlock(ctx)
		}
		var waitedOn LockInfo
		x, err := w.Lock(t.Context(), LockExclusive, LockOptions{Wait: time.Minute, Refresh: -1, Owner: "waiter",
			Sleep: fakeSleep(whileWaiting), OnWait: func(l LockInfo) { waitedOn = l }})
		if err != nil {
			t.Fatal(err)
		}
		if !checked || waitedOn.ID != h.Info().ID {
			t.Fatalf("checked %v; waited on %v, want the shared lock", checked, waitedOn)
		}
		if _, err := b.Lock(t.Context(), LockShared, noWait()); !errors.Is(err, ErrLocked) {
			t.Fatalf("shared lock beside the granted exclusive one: %v", err)
		}
		_ = x.Unlock(t.Context())
		mustLock(t, b, LockShared, noWait()).Unlock(t.Context())
	})
}

// A waiting lock whose holder is gone (stale by time, or its PID dead on
// this host) keeps no one out; a live one does.
func TestLockStaleWaiterIgnored(t *testing.T) {
	pid := proctest.DeadPID(t)
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		r := tr.openLocker(t)
		host, _ := os.Hostname()
		old := time.Now().Add(-DefaultLockStale - time.Second)
		saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockExclusive, Waiting: true, Owner: "old", Host: "elsewhere", PID: 1, Time: old, Refreshed: old})
		saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockExclusive, Waiting: true, Owner: "dead", Host: host, PID: pid, Time: time.Now(), Refreshed: time.Now()})
		for _, m := range []LockMode{LockShared, LockPrune, LockExclusive} {
			mustLock(t, r, m, noWait()).Unlock(t.Context())
		}
		live := saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockExclusive, Waiting: true, Owner: "live", Host: "elsewhere", PID: 1, Time: time.Now(), Refreshed: time.Now()})
		if h := lockedBy(t, lockErr(r.Lock(t.Context(), LockShared, noWait()))); h.ID != live {
			t.Fatalf("refused by %v, want the live waiter", h)
		}
		// It goes stale when its holder stops rewriting it.
		time.Sleep(DefaultLockStale + time.Second)
		mustLock(t, r, LockShared, noWait()).Unlock(t.Context())
		// The dead one was removed by the first locker (TestLockRemovesDeadHere).
		removed, err := r.RemoveLocks(t.Context(), false)
		if err != nil || len(removed) != 2 {
			t.Fatalf("unlock removed %+v, %v; want the two stale waiters of another host", removed, err)
		}
	})
}

func lockErr(_ *Lock, err error) error { return err }

// Two exclusive lockers waiting queue in the order they asked: the later
// one waits for the earlier, which does not wait for it. A prune's
// exclusive lock does not queue behind a waiter that waits for its own
// prune lock.
func TestLockExclusiveWaitersQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		r := tr.openLocker(t)
		later := saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockExclusive, Waiting: true, Owner: "later", Host: "elsewhere", PID: 1,
			Time: time.Now().Add(time.Second), Refreshed: time.Now()})
		mustLock(t, r, LockExclusive, noWait()).Unlock(t.Context()) // asked first: not behind "later"
		earlier := saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockExclusive, Waiting: true, Owner: "earlier", Host: "elsewhere", PID: 1,
			Time: time.Now().Add(-time.Second), Refreshed: time.Now()})
		sleeps := 0
		o := LockOptions{Wait: time.Minute, Refresh: -1, Owner: "me", Sleep: fakeSleep(func(ctx context.Context) error {
			sleeps++
			if sleeps == 3 { // the earlier waiter got its turn and is done
				return r.RemoveObject(ctx, crypt.KindLock, earlier)
			}
			return nil
		})}
		x, err := r.Lock(t.Context(), LockExclusive, o)
		if err != nil || sleeps != 3 {
			t.Fatalf("exclusive behind an earlier waiter: %v after %d waits", err, sleeps)
		}
		_ = x.Unlock(t.Context())
		if err := r.RemoveObject(t.Context(), crypt.KindLock, later); err != nil {
			t.Fatal(err)
		}

		// prune holds its prune lock; a repair index asked for an exclusive lock
		// before prune's delete phase and waits for the prune lock. Prune's
		// exclusive lock does not wait for it.
		p := mustLock(t, r, LockPrune, noWait())
		saveLockInfo(t, r, LockInfo{Version: 1, Mode: LockExclusive, Waiting: true, Owner: "repair", Host: "elsewhere", PID: 1,
			Time: time.Now().Add(-time.Minute), Refreshed: time.Now()})
		o = noWait()
		o.Owner = p.Owner()
		mustLock(t, r, LockExclusive, o).Unlock(t.Context())
		_ = p.Unlock(t.Context())
	})
}

// A waiter that gives up (Wait passed, or its context ends) takes its
// waiting object with it; one that waits long rewrites it, so it does not
// go stale while its holder lives.
func TestLockWaiterLeavesNothingAndStaysFresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTestRepo(t)
		a, b, w := tr.openLocker(t), tr.openLocker(t), tr.openLocker(t)
		h := mustLock(t, a, LockShared, noWait())
		defer h.Unlock(t.Context())
		onlyHolder := func() {
			t.Helper()
			if locks, _ := a.ListLocks(t.Context()); len(locks) != 1 || locks[0].ID != h.Info().ID {
				t.Fatalf("locks left: %+v", locks)
			}
		}
		_, err := w.Lock(t.Context(), LockExclusive, LockOptions{Wait: 10 * time.Second, Refresh: -1, Sleep: fakeSleep()})
		lockedBy(t, err)
		onlyHolder()

		ctx, cancel := context.WithCancel(t.Context())
		_, err = w.Lock(ctx, LockExclusive, LockOptions{Wait: time.Minute, Refresh: -1, Sleep: fakeSleep(func(context.Context) error {
			cancel()
			return context.Canceled
		})})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v", err)
		}
		onlyHolder()

		// Waiting for an hour, twice the stale time: the waiter still holds
		// its place at the end (a refresh of the holder keeps it live too).
		var last time.Time
		fresh := func(ctx context.Context) error {
			if time.Now().Sub(last) < DefaultLockStale/2 {
				return nil
			}
			last = time.Now()
			if err := h.Refresh(ctx); err != nil {
				return err
			}
			_, err := b.Lock(ctx, LockShared, noWait())
			if hl := lockedBy(t, err); !hl.Waiting {
				t.Errorf("after %s of waiting, a new shared lock was refused by %v, not the waiter", time.Now().Sub(h.Info().Time), hl)
			}
			return nil
		}
		_, err = w.Lock(t.Context(), LockExclusive, LockOptions{Wait: time.Hour, Sleep: fakeSleep(fresh)})
		if hl := lockedBy(t, err); hl.ID != h.Info().ID {
			t.Fatalf("gave up on %v", hl)
		}
		onlyHolder()
	})
}

// The waiting flag is an optional field: a granted lock's JSON is what
// older lifeboats wrote, and an older lifeboat (which ignores unknown
// fields) reads a waiting lock as a held exclusive one.
func TestLockWaitingFieldCompatible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		held, _ := json.Marshal(LockInfo{Version: 1, Mode: LockExclusive, Owner: "o", Host: "h", PID: 1, Time: now, Refreshed: now})
		if strings.Contains(string(held), "waiting") {
			t.Fatalf("a granted lock carries the flag: %s", held)
		}
		waiting, _ := json.Marshal(LockInfo{Version: 1, Mode: LockExclusive, Waiting: true, Owner: "o", Host: "h", PID: 1, Time: now, Refreshed: now})
		if !strings.Contains(string(waiting), `"waiting":true`) {
			t.Fatalf("waiting lock JSON: %s", waiting)
		}
		type v1LockInfo struct { // LockInfo before the flag
			Version   int       `json:"version"`
			Mode      LockMode  `json:"mode"`
			Owner     string    `json:"owner"`
			Host      string    `json:"host"`
			PID       int       `json:"pid"`
			Command   string    `json:"command,omitempty"`
			Time      time.Time `json:"time"`
			Refreshed time.Time `json:"refreshed"`
		}
		var old v1LockInfo
		if err := json.Unmarshal(waiting, &old); err != nil || old.Mode != LockExclusive || old.Version != 1 {
			t.Fatalf("an older reader: %+v, %v", old, err)
		}
		// And this lifeboat reads an older lock (no flag) as granted.
		tr := newTestRepo(t)
		r := tr.openLocker(t)
		ob, _ := json.Marshal(v1LockInfo{Version: 1, Mode: LockExclusive, Owner: "old", Host: "elsewhere", PID: 1, Time: now, Refreshed: now})
		id, err := r.SaveObject(t.Context(), crypt.KindLock, blob.Workspace, ob)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Lock(t.Context(), LockExclusive, noWait())
		if h := lockedBy(t, err); h.ID != id || h.Waiting {
			t.Fatalf("refused by %+v", h)
		}
	})
}

// The message of a lock not taken reads right for every mode ("its
// exclusive lock", never "a exclusive lock").
func TestLockedErrorMessage(t *testing.T) {
	for _, m := range []LockMode{LockShared, LockPrune, LockExclusive} {
		msg := (&LockedError{Want: m, Waited: time.Second}).Error()
		if !strings.Contains(msg, "waited 1s to take its "+string(m)+" lock, but ") || !errors.Is(&LockedError{}, ErrLocked) {
			t.Errorf("%s: %s", m, msg)
		}
	}
}
