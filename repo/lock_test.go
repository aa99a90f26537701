package repo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// fakeClock is a clock that only moves when a test's Sleep moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// openClocked opens a second handle on tr's repository (as another process
// would) with clock c.
func (tr *testRepo) openClocked(t *testing.T, c *fakeClock) *Repository {
	t.Helper()
	r, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: t.TempDir(), Now: c.Now, NoIndexDB: true})
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
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a, b := tr.openClocked(t, c), tr.openClocked(t, c)
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
	r := tr.openClocked(t, &fakeClock{now: time.Now()})
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
	tr := newTestRepo(t)
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a, b := tr.openClocked(t, c), tr.openClocked(t, c)
	h := mustLock(t, a, LockExclusive, LockOptions{Refresh: -1, Command: "prune"})
	defer h.Unlock(t.Context())
	sleeps := 0
	var waitedOn LockInfo
	o := LockOptions{Wait: 10 * time.Second, Refresh: -1,
		Sleep:  func(_ context.Context, d time.Duration) error { sleeps++; c.Advance(d); return nil },
		OnWait: func(h LockInfo) { waitedOn = h }}
	_, err := b.Lock(t.Context(), LockShared, o)
	var le *LockedError
	if !errors.As(err, &le) || le.Waited < 10*time.Second || sleeps < 2 {
		t.Fatalf("want a LockedError after waiting 10s with several tries, got %v after %d sleeps", err, sleeps)
	}
	if waitedOn.ID != h.Info().ID || !strings.Contains(err.Error(), "(prune)") {
		t.Fatalf("wait callback got %v; error %v", waitedOn, err)
	}
}

func TestLockWaitSucceedsWhenReleased(t *testing.T) {
	tr := newTestRepo(t)
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a, b := tr.openClocked(t, c), tr.openClocked(t, c)
	h := mustLock(t, a, LockShared, noWait())
	o := LockOptions{Wait: time.Minute, Refresh: -1, Sleep: func(ctx context.Context, d time.Duration) error {
		c.Advance(d)
		return h.Unlock(ctx) // the holder finishes while we wait
	}}
	l, err := b.Lock(t.Context(), LockExclusive, o)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(t.Context())
}

func TestLockStaleByTime(t *testing.T) {
	tr := newTestRepo(t)
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a, b := tr.openClocked(t, c), tr.openClocked(t, c)
	old := mustLock(t, a, LockExclusive, noWait()) // never refreshed: its holder "hangs"
	c.Advance(DefaultLockStale + time.Second)
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
}

func TestLockStaleDeadPID(t *testing.T) {
	tr := newTestRepo(t)
	r := tr.openClocked(t, &fakeClock{now: time.Now()})
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	dead := LockInfo{Version: 1, Mode: LockExclusive, Owner: "dead", Host: host, PID: cmd.Process.Pid, Time: r.now(), Refreshed: r.now()}
	b, _ := json.Marshal(dead)
	id, err := r.SaveObject(t.Context(), crypt.KindLock, blob.Workspace, b)
	if err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, r, LockShared, noWait())
	_ = l.Unlock(t.Context())
	removed, err := r.RemoveLocks(t.Context(), false)
	if err != nil || len(removed) != 1 || removed[0].ID != id || !strings.Contains(removed[0].StaleReason, "not running") {
		t.Fatalf("removed %v, %v", removed, err)
	}
}

func TestLockRefreshAndDamaged(t *testing.T) {
	tr := newTestRepo(t)
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	r := tr.openClocked(t, c)
	l := mustLock(t, r, LockShared, noWait())
	first := l.Info().ID
	c.Advance(time.Minute)
	if err := l.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	locks, _ := r.ListLocks(t.Context())
	if len(locks) != 1 || locks[0].ID == first || !locks[0].Refreshed.Equal(c.Now()) {
		t.Fatalf("after refresh: %+v", locks)
	}
	// An object in locks/ that does not open is reported and keeps no one out.
	bad, err := r.SaveObject(t.Context(), crypt.KindLock, blob.Workspace, []byte("not json"))
	if err != nil {
		t.Fatal(err)
	}
	x := mustLock(t, tr.openClocked(t, c), LockShared, noWait())
	_ = x.Unlock(t.Context())
	removed, _ := r.RemoveLocks(t.Context(), false)
	if len(removed) != 1 || removed[0].ID != bad || removed[0].Damaged == "" {
		t.Fatalf("removed %+v", removed)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
