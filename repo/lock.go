package repo

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/osutil"
)

// LockMode says what a lock lets its holder do and whom it keeps out.
//
//	shared:    captures, restores, forget. Any number at once.
//	prune:     one prune (mark, plan, repack); compatible with shared locks,
//	           so captures go on while a prune plans.
//	exclusive: the delete phase of prune, repair index. Nothing else at once.
//
// Locks held by the same owner (one process) never conflict with each other,
// so a prune can take its exclusive lock while it holds its prune lock.
//
// Writers are preferred: an exclusive locker that has to wait stays in line
// with a waiting lock object (LockInfo.Waiting), and new shared and prune
// lockers wait behind it, so a stream of overlapping shared locks cannot
// starve it (see Repository.Lock).
type LockMode string

// Lock modes.
const (
	LockShared    LockMode = "shared"
	LockPrune     LockMode = "prune"
	LockExclusive LockMode = "exclusive"
)

func (m LockMode) valid() bool { return m == LockShared || m == LockPrune || m == LockExclusive }

// conflicts reports whether locks of modes a and b (of different owners)
// cannot be held at once.
func (m LockMode) conflicts(o LockMode) bool {
	switch {
	case m == LockExclusive || o == LockExclusive:
		return true
	case m == LockPrune && o == LockPrune:
		return true
	}
	return false
}

// Lock timing defaults. A held lock is rewritten every DefaultLockRefresh;
// one not rewritten for DefaultLockStale is stale: its holder is presumed
// dead and the lock no longer keeps anyone out.
const (
	DefaultLockRefresh = 5 * time.Minute
	DefaultLockStale   = 30 * time.Minute
	DefaultLockWait    = time.Minute
)

// ErrLocked: another process holds a conflicting lock (exit code 12).
var ErrLocked = errors.New("repository is locked")

// ErrLockLost: the lock could not be refreshed in time, so others may now
// treat it as stale; the holder must stop before it deletes or promotes.
var ErrLockLost = errors.New("repository lock was lost (not refreshed in time)")

// LockInfo is the content of a lock object (kind lock, workspace tier).
type LockInfo struct {
	Version   int       `json:"version"`
	Mode      LockMode  `json:"mode"`
	Owner     string    `json:"owner"` // random per holder; locks of one owner never conflict
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Command   string    `json:"command,omitempty"`
	Time      time.Time `json:"time"`      // when the lock was first taken (asked for, while Waiting)
	Refreshed time.Time `json:"refreshed"` // when this object was written
	// Waiting marks an exclusive lock not granted yet: its owner waits for
	// the locks held before it to go, and new lockers wait behind it. A
	// lifeboat that does not know the field reads it as a held exclusive
	// lock, and waits too.
	Waiting bool `json:"waiting,omitempty"`

	ID          blob.ID `json:"-"` // the lock object's name
	Damaged     string  `json:"-"` // why the object could not be read; empty when it was
	StaleReason string  `json:"-"` // why it is stale; empty when it is live

	// deadHere: its holder ran on this host (same host name) and its PID is
	// not running, whatever its age. Repository.Lock removes such objects.
	deadHere bool
}

// Stale reports whether the lock no longer keeps anyone out.
func (l LockInfo) Stale() bool { return l.StaleReason != "" }

func (l LockInfo) String() string {
	if l.Damaged != "" {
		return fmt.Sprintf("lock %s (unreadable: %s)", l.ID.Short(), l.Damaged)
	}
	cmd := ""
	if l.Command != "" {
		cmd = " (" + l.Command + ")"
	}
	if l.Waiting {
		return fmt.Sprintf("%s lock %s waited for by PID %d on host %q%s since %s (new locks wait behind it), refreshed %s",
			l.Mode, l.ID.Short(), l.PID, l.Host, cmd, l.Time.UTC().Format(time.RFC3339), l.Refreshed.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s lock %s held by PID %d on host %q%s since %s, refreshed %s",
		l.Mode, l.ID.Short(), l.PID, l.Host, cmd, l.Time.UTC().Format(time.RFC3339), l.Refreshed.UTC().Format(time.RFC3339))
}

// waitingExclusive reports whether l is an exclusive lock still waiting.
func (l LockInfo) waitingExclusive() bool { return l.Waiting && l.Mode == LockExclusive }

// before orders waiting exclusive lockers: the one that asked first (by
// Time, then by owner) goes first.
func (l LockInfo) before(o LockInfo) bool {
	if !l.Time.Equal(o.Time) {
		return l.Time.Before(o.Time)
	}
	return l.Owner < o.Owner
}

// blockedBy reports whether live lock l of another owner keeps me out.
// ownerHolds: my owner holds another live, granted lock.
func (me LockInfo) blockedBy(l LockInfo, ownerHolds bool) bool {
	if l.ID == me.ID || l.Stale() || l.Owner == me.Owner || !me.Mode.conflicts(l.Mode) {
		return false
	}
	if l.waitingExclusive() {
		switch {
		case ownerHolds:
			return false // it waits for my owner's lock: waiting behind it would deadlock
		case me.Mode == LockExclusive:
			return l.before(me) // waiters queue in the order they asked
		}
	}
	return true
}

// LockedError names the lock that kept a caller out after it waited.
type LockedError struct {
	Want   LockMode
	Holder LockInfo
	Waited time.Duration
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%v: waited %s to take its %s lock, but %s; if that process is gone, its lock goes stale %s after its last refresh (or at once when its PID is dead on this host) and `lifeboat unlock` removes it",
		ErrLocked, e.Waited.Round(time.Millisecond), e.Want, e.Holder, DefaultLockStale)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// LockOptions tune Lock. Zero values take the defaults.
type LockOptions struct {
	Wait       time.Duration // how long to wait for conflicting locks to go; default DefaultLockWait; <0: do not wait
	Refresh    time.Duration // how often the lock is rewritten; default DefaultLockRefresh; <0: never (tests)
	StaleAfter time.Duration // default DefaultLockStale
	Command    string        // recorded in the lock, for messages
	// Owner shares an owner with another lock of this process; default: a
	// new random one. A lock taken inside the work of a held one (nested)
	// should pass the held lock's owner: then it does not wait behind a
	// waiting exclusive lock, which may be waiting for the held one.
	// Independent pieces of work (each capture of a server) must keep
	// their own owners: locks of one owner that keep overlapping would
	// never wait behind a waiting exclusive lock, and could starve it.
	Owner string
	// Sleep waits between attempts; default: a timer. Tests advance a fake clock.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnWait is called once when the first attempt finds a conflicting lock.
	OnWait func(holder LockInfo)
}

func (o LockOptions) withDefaults() LockOptions {
	if o.Wait == 0 {
		o.Wait = DefaultLockWait
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultLockRefresh
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultLockStale
	}
	if o.Owner == "" {
		var b [8]byte
		_, _ = crand.Read(b[:])
		o.Owner = hex.EncodeToString(b[:])
	}
	if o.Sleep == nil {
		o.Sleep = osutil.Sleep
	}
	return o
}

// Lock is a held repository lock. A goroutine rewrites it every
// LockOptions.Refresh until Unlock.
type Lock struct {
	r    *Repository
	o    LockOptions
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	info    LockInfo
	lost    error
	release sync.Once
}

// Lock takes a lock of mode m. It writes its lock object first and then
// lists the others: of two processes that lock at once, at least one sees
// the other (each saves before it lists), so two conflicting locks are
// never both granted. On a conflict it waits and tries again, until
// LockOptions.Wait has passed; then it fails with a *LockedError naming
// the holder. Stale locks (LockInfo.Stale) keep no one out. This needs
// nothing from the storage but read-after-write listing: no flock, so it
// works on object storage too.
//
// Writer preference. A shared or prune locker that meets a conflict
// removes its object while it waits. An exclusive locker instead keeps a
// waiting object (LockInfo.Waiting: mode exclusive, not granted),
// rewritten like any lock and going stale like any lock, so that:
//   - a new shared or prune locker that sees a live waiting exclusive lock
//     of another owner waits behind it, as for a held one;
//   - the waiter itself waits only for the granted locks (the shared locks
//     held before it) and for waiters that asked before it (by Time, then
//     owner), so two waiters queue instead of blocking each other;
//   - a locker whose owner already holds a live lock (prune's exclusive
//     delete phase under its prune lock; a second shared lock of a process
//     that passes the same Owner) does not wait behind waiters: they wait
//     for that lock, and waiting behind them would deadlock.
//
// A waiter that sees no conflict writes its granted object (before
// removing the waiting one, so it is never out of sight) and lists again;
// only that second listing grants the lock. So waiting objects only
// order lockers: the exclusion still rests on granted objects, written
// before each final listing, and a waiting object wrongly ignored (stale
// by a skewed clock, or by an old lifeboat) costs fairness, not safety. A
// waiter that dies leaves its object until it goes stale (at once when
// its PID is dead on the same host), and gives up its place after Wait.
// An old lifeboat ignores the unknown field and takes a waiting object
// for a held exclusive lock: it waits behind it, which is safe.
func (r *Repository) Lock(ctx context.Context, m LockMode, o LockOptions) (*Lock, error) {
	if !m.valid() {
		return nil, fmt.Errorf("invalid lock mode %q", m)
	}
	o = o.withDefaults()
	host, _ := os.Hostname()
	now := r.now()
	l := &Lock{r: r, o: o, info: LockInfo{Version: 1, Mode: m, Owner: o.Owner, Host: host, PID: os.Getpid(),
		Command: o.Command, Time: now, Refreshed: now}}
	start := now
	delay := 100 * time.Millisecond
	waited := false
	// A waiting object is rewritten while it waits, at least as often as a
	// held lock is refreshed.
	rewriteEvery := o.StaleAfter / 6
	if o.Refresh > 0 && o.Refresh < rewriteEvery {
		rewriteEvery = o.Refresh
	}
	written := false
	drop := func() {
		if written {
			_ = r.RemoveObject(context.WithoutCancel(ctx), crypt.KindLock, l.info.ID)
			written = false
		}
	}
	for {
		if !written {
			if err := l.write(ctx); err != nil {
				return nil, err
			}
			written = true
		}
		holder, found, err := r.conflicting(ctx, l.info, o.StaleAfter)
		if err != nil {
			drop()
			return nil, err
		}
		if !found && !l.info.Waiting {
			break
		}
		if !found { // a waiter's turn: write the granted object, then list again
			if err := l.rewrite(ctx, false); err != nil {
				drop()
				return nil, err
			}
			continue
		}
		waitedFor := r.now().Sub(start)
		if o.Wait < 0 || waitedFor >= o.Wait {
			drop()
			return nil, &LockedError{Want: m, Holder: holder, Waited: waitedFor}
		}
		if m == LockExclusive {
			// Stay in line: a waiting object, rewritten before it ages.
			if !l.info.Waiting || r.now().Sub(l.info.Refreshed) >= rewriteEvery {
				if err := l.rewrite(ctx, true); err != nil {
					drop()
					return nil, err
				}
			}
		} else {
			if err := r.RemoveObject(context.WithoutCancel(ctx), crypt.KindLock, l.info.ID); err != nil {
				return nil, fmt.Errorf("removing own lock after a conflict: %w", err)
			}
			written = false
		}
		if !waited && o.OnWait != nil {
			o.OnWait(holder)
		}
		waited = true
		// Jitter, so two writers that keep meeting fall out of step.
		d := min(delay+rand.N(delay/2+1), o.Wait-waitedFor)
		if err := o.Sleep(ctx, d); err != nil {
			drop()
			return nil, err
		}
		delay = min(delay*2, 5*time.Second)
		if !written {
			l.info.Refreshed = r.now()
		}
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	if o.Refresh > 0 {
		go l.refresher()
	} else {
		close(l.done)
	}
	return l, nil
}

// write saves the lock's current info as a new object and records its id.
func (l *Lock) write(ctx context.Context) error {
	b, err := json.Marshal(l.info)
	if err != nil {
		return err
	}
	id, err := l.r.SaveObject(ctx, crypt.KindLock, blob.Workspace, b)
	if err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	l.info.ID = id
	return nil
}

// rewrite writes the lock as a new object, waiting or granted, with the
// current time, then removes the object it replaces (so the lock is never
// out of sight).
func (l *Lock) rewrite(ctx context.Context, waiting bool) error {
	old, oldWaiting := l.info.ID, l.info.Waiting
	l.info.Waiting, l.info.Refreshed = waiting, l.r.now()
	if err := l.write(ctx); err != nil {
		l.info.ID, l.info.Waiting = old, oldWaiting
		return err
	}
	if err := l.r.RemoveObject(context.WithoutCancel(ctx), crypt.KindLock, old); err != nil && !isNotFound(err) {
		return fmt.Errorf("removing the previous lock object %s: %w", old.Short(), err)
	}
	return nil
}

// conflicting returns a live lock of another owner that keeps me out
// (LockInfo.blockedBy). It removes the lock objects of dead processes of
// this host that it sees (removeDead).
func (r *Repository) conflicting(ctx context.Context, me LockInfo, staleAfter time.Duration) (LockInfo, bool, error) {
	locks, err := r.listLocks(ctx, staleAfter)
	if err != nil {
		return LockInfo{}, false, err
	}
	r.removeDead(ctx, me, locks)
	ownerHolds := false
	for _, l := range locks {
		if l.Owner == me.Owner && l.ID != me.ID && !l.Stale() && !l.Waiting {
			ownerHolds = true
		}
	}
	// Granted locks first, so a message names what is really held.
	for _, waiting := range []bool{false, true} {
		for _, l := range locks {
			if l.Waiting == waiting && me.blockedBy(l, ownerHolds) {
				return l, true, nil
			}
		}
	}
	return LockInfo{}, false, nil
}

// removeDead removes the lock objects, among locks, whose holder ran on
// this host and is no longer running (LockInfo.deadHere): killed
// processes cannot release their locks, and no other host can tell that
// they are dead, so without this they would pile up until `lifeboat
// unlock`. They keep no one out already; removing one changes nothing for
// the exclusion. Locks of other hosts are never removed here: they go
// stale by time, and `lifeboat unlock` removes them. A removal that fails
// is left to the next locker or to `lifeboat unlock`.
func (r *Repository) removeDead(ctx context.Context, me LockInfo, locks []LockInfo) {
	for _, l := range locks {
		if l.deadHere && l.ID != me.ID && l.Owner != me.Owner {
			_ = r.RemoveObject(context.WithoutCancel(ctx), crypt.KindLock, l.ID)
		}
	}
}

// ListLocks returns every lock object, with StaleReason set on stale ones
// (DefaultLockStale) and Damaged on unreadable ones (which are stale too).
func (r *Repository) ListLocks(ctx context.Context) ([]LockInfo, error) {
	return r.listLocks(ctx, DefaultLockStale)
}

func (r *Repository) listLocks(ctx context.Context, staleAfter time.Duration) ([]LockInfo, error) {
	var ids []blob.ID
	if err := r.ListObjects(ctx, crypt.KindLock, func(id blob.ID) error { ids = append(ids, id); return nil }); err != nil {
		return nil, fmt.Errorf("listing locks: %w", err)
	}
	host, _ := os.Hostname()
	now := r.now()
	out := make([]LockInfo, 0, len(ids))
	for _, id := range ids {
		info, err := r.loadLock(ctx, id)
		info.deadHere = err == nil && info.Host == host && !osutil.ProcessAlive(info.PID)
		switch {
		case isNotFound(err):
			continue // released or refreshed while we listed
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			info = LockInfo{ID: id, Damaged: err.Error(), StaleReason: "unreadable"}
		case now.Sub(info.Refreshed) > staleAfter:
			info.StaleReason = fmt.Sprintf("not refreshed for %s", now.Sub(info.Refreshed).Round(time.Second))
		case info.deadHere:
			info.StaleReason = fmt.Sprintf("PID %d is not running on this host", info.PID)
		}
		out = append(out, info)
	}
	return out, nil
}

func (r *Repository) loadLock(ctx context.Context, id blob.ID) (LockInfo, error) {
	_, b, err := r.LoadObject(ctx, crypt.KindLock, id)
	if err != nil {
		return LockInfo{}, err
	}
	info, err := decodeLock(b)
	if err != nil {
		return LockInfo{}, err
	}
	info.ID = id
	return info, nil
}

// decodeLock decodes a lock object's plaintext. Unknown fields are
// ignored (a newer lifeboat may add some); version and mode must be known,
// and its times must encode again.
func decodeLock(b []byte) (LockInfo, error) {
	var info LockInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return LockInfo{}, fmt.Errorf("lock does not decode: %w", err)
	}
	if info.Version != 1 || !info.Mode.valid() {
		return LockInfo{}, fmt.Errorf("lock has version %d and mode %q", info.Version, info.Mode)
	}
	// Go decodes some times it cannot encode (an offset of 24 hours, a
	// year that becomes 0 or 10000 in UTC); such a lock could not be
	// listed as JSON (`unlock --list --json`), so it does not decode.
	for _, ts := range []time.Time{info.Time, info.Refreshed} {
		if _, err := ts.MarshalJSON(); err != nil {
			return LockInfo{}, fmt.Errorf("lock has a time that cannot be written back: %w", err)
		}
	}
	return info, nil
}

func isNotFound(err error) bool { return errors.Is(err, backend.ErrNotFound) }

func lockHandle(id blob.ID) backend.Handle {
	return backend.Handle{Type: backend.Lock, Name: id.String()}
}

// RemoveLocks removes stale and unreadable locks, and with force every lock.
// It returns what it removed.
func (r *Repository) RemoveLocks(ctx context.Context, force bool) ([]LockInfo, error) {
	locks, err := r.ListLocks(ctx)
	if err != nil {
		return nil, err
	}
	var removed []LockInfo
	for _, l := range locks {
		if !force && !l.Stale() {
			continue
		}
		if err := r.RemoveObject(ctx, crypt.KindLock, l.ID); err != nil && !isNotFound(err) {
			return removed, fmt.Errorf("removing lock %s: %w", l.ID.Short(), err)
		}
		removed = append(removed, l)
	}
	return removed, nil
}

// Info returns the lock as last written.
func (l *Lock) Info() LockInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info
}

// Owner is the lock's owner id; pass it in LockOptions.Owner to take a
// second lock that does not conflict with this one.
func (l *Lock) Owner() string { return l.o.Owner }

// Err returns ErrLockLost once the lock was not refreshed within
// StaleAfter, or a refresh found its object removed (by a forced unlock).
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if age := l.r.now().Sub(l.info.Refreshed); age > l.o.StaleAfter-l.o.StaleAfter/10 {
		return fmt.Errorf("%w: last refresh %s ago", ErrLockLost, age.Round(time.Second))
	}
	return nil
}

// Refresh writes a new lock object with the current time and removes the
// old one. The refresher goroutine calls it; tests call it directly.
func (l *Lock) Refresh(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.info.ID
	if _, err := l.r.be.Stat(ctx, lockHandle(old)); isNotFound(err) {
		l.lost = fmt.Errorf("%w: lock %s was removed by someone else (`lifeboat unlock --force`?)", ErrLockLost, old.Short())
		return l.lost
	}
	l.info.Refreshed = l.r.now()
	if err := l.write(ctx); err != nil {
		l.info.ID = old
		return err
	}
	if err := l.r.RemoveObject(ctx, crypt.KindLock, old); err != nil && !isNotFound(err) {
		return fmt.Errorf("removing the previous lock object %s: %w", old.Short(), err)
	}
	return nil
}

func (l *Lock) refresher() {
	defer close(l.done)
	t := time.NewTicker(l.o.Refresh)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(l.r.bg, l.o.Refresh)
			_ = l.Refresh(ctx) // a failure shows in Err once the lock ages
			cancel()
		}
	}
}

// Unlock stops refreshing and removes the lock object. Later calls do nothing.
func (l *Lock) Unlock(ctx context.Context) error {
	var err error
	l.release.Do(func() {
		close(l.stop)
		<-l.done
		l.mu.Lock()
		defer l.mu.Unlock()
		if rerr := l.r.RemoveObject(context.WithoutCancel(ctx), crypt.KindLock, l.info.ID); rerr != nil && !isNotFound(rerr) {
			err = fmt.Errorf("removing lock %s: %w", l.info.ID.Short(), rerr)
		}
	})
	return err
}
