package repo

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrSessionExpired: a capture took longer than the session limit, so
// what it reused may have been deleted by a prune beside it; its snapshot
// is refused (not stored, or removed again). Running it again is safe,
// and incremental: what it uploaded is indexed and reused.
var ErrSessionExpired = errors.New("capture took longer than the session limit")

// DefaultSessionLimit is how long a capture may run, from BeginSession to
// its snapshot being stored. A prune's delete-after margin must be longer
// than every capture's limit plus the clock difference between hosts.
const DefaultSessionLimit = 12 * time.Hour

// Session is one capture's window on the repository: the time it began,
// before it learned which packs are condemned and before its first
// lookup. Its snapshot is committed only while the session is younger
// than the limit (Commit), so a prune that condemned a pack after the
// session began deletes it only after that snapshot is stored, and sees
// it. Captures take no repository lock.
//
// A session is also the unit a lost pack fails: Commit refuses the
// snapshot if a pack could not be stored after the session began
// (ErrPackLost), since blobs the session saved or reused may have been in
// it; later sessions save those blobs again.
type Session struct {
	r     *Repository
	wall  time.Time // r.now() at the start (an injected clock in tests)
	mono  time.Time // time.Now() at the start: its monotonic reading goes on while the process is stopped
	limit time.Duration
	lost  uint64 // packs lost before the session began (Repository.lostSeq)
}

// BeginSession starts a capture session: it records the start, loads the
// repository's condemnation objects and syncs the local index, so that
// nothing a prune condemned or deleted before the start is reused. With
// Options.SessionShare, a session that begins within that long of the
// start of the last such refresh shares it: its start is that one's.
func (r *Repository) BeginSession(ctx context.Context) (*Session, error) {
	r.mu.Lock()
	err, lost := r.usable(), r.lostSeq
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	if share := r.opts.SessionShare; share > 0 && !r.refreshed.wall.IsZero() && r.since(r.refreshed) < share {
		return r.session(r.refreshed, lost), nil
	}
	start := r.startNow()
	r.refreshed = startTime{}
	if err := r.refreshCondemned(ctx); err != nil {
		return nil, err
	}
	r.refreshed = start
	return r.session(start, lost), nil
}

func (r *Repository) session(start startTime, lost uint64) *Session {
	return &Session{r: r, wall: start.wall, mono: start.mono, limit: r.opts.SessionLimit, lost: lost}
}

// RefreshCondemned is BeginSession's refresh alone: prune calls it before
// it plans.
func (r *Repository) RefreshCondemned(ctx context.Context) error {
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	return r.refreshCondemned(ctx)
}

// Elapsed is how long the session has run: the larger of the injected
// clock's and the monotonic clock's measures.
func (s *Session) Elapsed() time.Duration {
	return max(s.r.now().Sub(s.wall), time.Since(s.mono))
}

// Commit stores the session's snapshot with save, if the session is
// still within its limit, and checks the limit again once it is stored:
// a process stopped between the first check and the store might have
// stored it after a prune deleted what it references, so then undo
// removes it again. Either way the error wraps ErrSessionExpired. The
// caller flushes everything the snapshot references before. A pack lost
// since the session began refuses the snapshot too, before it is stored
// (ErrPackLost).
func (s *Session) Commit(ctx context.Context, save func(context.Context) error, undo func(context.Context) error) error {
	if el := s.Elapsed(); el > s.limit {
		return s.expired(el)
	}
	s.r.mu.Lock()
	lost := s.r.lostSince(s.lost)
	s.r.mu.Unlock()
	if lost != nil {
		return fmt.Errorf("the snapshot is not stored: blobs this capture saved or reused may have been in a pack that could not be stored; run the capture again (it saves them again): %w", lost)
	}
	if err := save(ctx); err != nil {
		return err
	}
	if el := s.Elapsed(); el > s.limit {
		if err := undo(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("%w; removing the snapshot it stored failed too (run `lifeboat check`): %w", s.expired(el), err)
		}
		return s.expired(el)
	}
	return nil
}

func (s *Session) expired(el time.Duration) error {
	return fmt.Errorf("%w: it ran %s, the limit is %s (a prune may have deleted what it reused); the snapshot is not stored: run the capture again (it reuses what this one uploaded)",
		ErrSessionExpired, el.Round(time.Second), s.limit)
}

// startTime is a moment by the injected clock and the monotonic one.
type startTime struct{ wall, mono time.Time }

func (r *Repository) startNow() startTime { return startTime{r.now(), time.Now()} }

func (r *Repository) since(t startTime) time.Duration {
	return max(r.now().Sub(t.wall), time.Since(t.mono))
}
