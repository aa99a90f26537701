package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/index"
)

// A session that cannot read a condemnation object fails instead of
// taking it to condemn nothing (prune, which reads it fine later, would
// delete packs the capture reused); a condemnation that does not decode
// condemns nothing, for captures and prune alike, and one that reads
// condemns its packs in the session's index.
func TestSessionCondemnationLoads(t *testing.T) {
	ctx := t.Context()
	tr := newTestRepo(t)
	pack := blob.ID{1}
	open := func(be backend.Backend) *Repository {
		t.Helper()
		r, err := Open(ctx, be, testPassword, Options{CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return r
	}
	id, err := open(tr.be).Condemn(ctx, time.Now(), time.Hour, []blob.ID{pack})
	must(t, err)

	if _, err := open(loadFails{tr.be, backend.Condemned, syscall.EIO}).BeginSession(ctx); !errors.Is(err, syscall.EIO) {
		t.Fatalf("session with an unreadable condemnation: %v, want EIO", err)
	}

	r := open(tr.be)
	if _, err := r.BeginSession(ctx); err != nil {
		t.Fatal(err)
	}
	if u, err := r.Index().Unusable(pack); err != nil || u&index.UnusableCondemned == 0 {
		t.Fatalf("condemned pack after the session began: reasons %d, %v", u, err)
	}
	list, damaged, err := r.Condemnations(ctx)
	if err != nil || len(list) != 1 || list[0].ID != id || len(damaged) != 0 {
		t.Fatalf("Condemnations: %v, %v, %v", list, damaged, err)
	}

	// Damaged on the store: nobody acts on it.
	path := filepath.Join(tr.dir, "condemned", id.String())
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("condemnation object not at %s: %v", path, err)
	}
	must(t, os.WriteFile(path, []byte("not a sealed object"), 0o600))
	r = open(tr.be)
	if _, err := r.BeginSession(ctx); err != nil {
		t.Fatalf("session with a damaged condemnation: %v", err)
	}
	if u, err := r.Index().Unusable(pack); err != nil || u != 0 {
		t.Fatalf("pack of a damaged condemnation: reasons %d, %v", u, err)
	}
	if list, damaged, err := r.Condemnations(ctx); err != nil || len(list) != 0 || damaged[id] == nil {
		t.Fatalf("Condemnations with one damaged: %v, %v, %v", list, damaged, err)
	}
}

// listCounter counts the listings of condemnation objects.
type listCounter struct {
	backend.Backend
	n *int
}

func (b listCounter) List(ctx context.Context, t backend.FileType, fn func(backend.FileInfo) error) error {
	if t == backend.Condemned {
		*b.n++
	}
	return b.Backend.List(ctx, t, fn)
}

// With SessionShare, a session that begins soon after another shares its
// refresh and its start (its limit counts from there); once that start is
// SessionShare old, the next session refreshes and sees what a prune in
// another process condemned meanwhile.
func TestSessionShare(t *testing.T) {
	ctx := t.Context()
	tr := newTestRepo(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lists := 0
	r, err := Open(ctx, listCounter{tr.be, &lists}, testPassword, Options{CacheDir: t.TempDir(), SessionShare: time.Minute,
		Now: func() time.Time { return now }})
	must(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	first, err := r.BeginSession(ctx)
	must(t, err)
	if lists != 1 {
		t.Fatalf("first session listed the condemnation objects %d times, want 1", lists)
	}

	other, err := Open(ctx, tr.be, testPassword, Options{CacheDir: t.TempDir()})
	must(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	pack := blob.ID{7}
	_, err = other.Condemn(ctx, now, time.Hour, []blob.ID{pack})
	must(t, err)

	now = now.Add(30 * time.Second)
	shared, err := r.BeginSession(ctx)
	must(t, err)
	if lists != 1 || shared.wall != first.wall || shared.mono != first.mono {
		t.Fatalf("a session 30 s after the first: %d listings, start %v, want 1 and the first's start %v", lists, shared.wall, first.wall)
	}
	if el := shared.Elapsed(); el < 30*time.Second {
		t.Fatalf("shared session's age %v, want at least the 30 s since the refresh it shares", el)
	}

	now = now.Add(30 * time.Second)
	fresh, err := r.BeginSession(ctx)
	must(t, err)
	if lists != 2 || !fresh.wall.Equal(now) {
		t.Fatalf("a session a minute after the first: %d listings, start %v, want 2 and %v", lists, fresh.wall, now)
	}
	if u, err := r.Index().Unusable(pack); err != nil || u&index.UnusableCondemned == 0 {
		t.Fatalf("pack another process condemned, after a fresh session: reasons %d, %v", u, err)
	}
}
